"""A small labelled corpus for search quality: eight topics of four documents, six distractors, eight queries."""

from __future__ import annotations

DOCUMENTS: dict[str, str] = {
    # databases
    "db-wal": "SQLite write-ahead logging lets readers continue while a writer appends to the WAL file; "
    "a checkpoint later copies pages back into the main database file.",
    "db-fts": "The FTS5 extension adds full-text search to SQLite. Its bm25() function ranks rows by relevance, "
    "and snippet() returns the matching text with highlighted terms.",
    "db-index": "A database index on the queried column turns a full table scan into a B-tree lookup; "
    "EXPLAIN QUERY PLAN shows whether SQLite uses it.",
    "db-tx": "Wrap many INSERT statements in one transaction: SQLite then syncs the database file once "
    "instead of once per row, which is orders of magnitude faster.",
    # asyncio
    "py-tasks": "In Python asyncio, create_task schedules a coroutine on the event loop; keep a reference, "
    "or the task may be garbage collected before it finishes.",
    "py-gather": "asyncio.gather runs awaitables concurrently and returns their results in order; "
    "a TaskGroup cancels the remaining tasks when one of them fails.",
    "py-timeout": "asyncio.timeout() cancels the enclosed coroutine when the deadline passes and raises "
    "TimeoutError in the awaiting task of the event loop.",
    "py-blocking": "Blocking calls freeze the asyncio event loop; run them in a worker thread with "
    "asyncio.to_thread so other coroutines keep running.",
    # tomatoes
    "garden-plant": "Plant tomato seedlings deep, burying the stem up to the first leaves; roots grow along "
    "the buried stem and the plant stands sturdier.",
    "garden-water": "Water tomatoes deeply and regularly at the base. Irregular watering causes blossom end "
    "rot and split fruit.",
    "garden-prune": "Pinch off the suckers that grow between the main stem and the branches of indeterminate "
    "tomato plants to get larger fruit.",
    "garden-blight": "Early blight shows as brown rings on the lower tomato leaves; remove infected foliage "
    "and mulch so soil does not splash onto the plants.",
    # black holes
    "astro-horizon": "Nothing escapes a black hole once it crosses the event horizon, whose radius is the "
    "Schwarzschild radius set by the mass.",
    "astro-hawking": "Hawking radiation makes black holes slowly lose mass; small black holes evaporate "
    "faster than large ones.",
    "astro-image": "The Event Horizon Telescope imaged the shadow of the supermassive black hole in M87 "
    "by combining radio dishes across the Earth.",
    "astro-merger": "LIGO detected gravitational waves from two merging black holes, a chirp lasting a "
    "fraction of a second.",
    # bread
    "bread-starter": "A sourdough starter is flour and water colonised by wild yeast and lactic bacteria; "
    "feed it daily to keep the bread leaven active.",
    "bread-knead": "Kneading bread dough develops gluten, which traps the gas from the yeast and gives the "
    "loaf its structure.",
    "bread-proof": "Let the dough proof until it has nearly doubled; an over-proofed loaf collapses in the "
    "oven and bakes flat bread.",
    "bread-bake": "Bake bread in a preheated Dutch oven: the trapped steam keeps the crust soft at first so "
    "the loaf can rise fully.",
    # bicycles
    "bike-chain": "Clean and lubricate the bicycle chain every few hundred kilometres; a dry chain wears the "
    "cassette and chainrings quickly.",
    "bike-tyre": "To fix a flat bicycle tyre, remove the inner tube, find the puncture, patch it and check "
    "the tyre for the thorn that caused it.",
    "bike-brakes": "Adjust rim brakes so the pads meet the rim squarely; replace worn bicycle brake pads "
    "before the grooves disappear.",
    "bike-gears": "Index the rear derailleur with the barrel adjuster until the bicycle chain shifts "
    "cleanly across every gear of the cassette.",
    # git
    "git-rebase": "git rebase replays your commits on top of another branch, giving a linear history "
    "without merge commits.",
    "git-bisect": "git bisect performs a binary search through the commit history to find the commit that "
    "introduced a bug.",
    "git-stash": "git stash saves uncommitted changes of the working tree so you can switch branches and "
    "restore them later with git stash pop.",
    "git-reflog": "The git reflog records where branch tips have been, so a commit lost after a bad reset "
    "can be recovered.",
    # coffee
    "coffee-grind": "Grind coffee beans just before brewing; espresso needs a fine grind and a French press "
    "a coarse one.",
    "coffee-ratio": "A good brewing ratio is about 60 grams of ground coffee per litre of water, adjusted to taste.",
    "coffee-temp": "Brew coffee with water just off the boil, around 93 degrees Celsius; hotter water "
    "extracts bitter compounds.",
    "coffee-espresso": "An espresso shot forces hot water through compacted coffee at nine bars of pressure "
    "in about 25 seconds.",
    # distractors: each shares words with one or two queries but answers none
    "x-table": "The coffee table book about black holes had a dark cover and glossy pages.",
    "x-office": "The bank opened a new branch office; the history of the company fills a book, and every "
    "commit to the budget is signed.",
    "x-coaster": "At the fair, the event loop of the roller coaster ran faster than the tasks of the staff.",
    "x-chili": "For the chili, brown the ground beef with beans and a loaf of cornbread on the side.",
    "x-races": "A database of bicycle races since 1900 lists every winner and their tyre sponsor.",
    "x-plants": "Power plants need healthy cooling water; growing demand strains the grid.",
}

# Each query is phrased the way a user would ask, not copied from the documents.
QUERIES: dict[str, str] = {
    "database": "speed up SQLite database inserts and search ranking",
    "asyncio": "asyncio coroutine tasks on the event loop",
    "garden": "growing healthy tomato plants",
    "astro": "black holes event horizon",
    "bread": "baking a loaf of bread with yeast dough",
    "bike": "bicycle chain and tyre repair",
    "git": "git commit history and branches",
    "coffee": "brewing coffee with ground beans",
}

RELEVANT: dict[str, set[str]] = {
    topic: {key for key in DOCUMENTS if key.startswith(prefix)}
    for topic, prefix in {
        "database": "db-",
        "asyncio": "py-",
        "garden": "garden-",
        "astro": "astro-",
        "bread": "bread-",
        "bike": "bike-",
        "git": "git-",
        "coffee": "coffee-",
    }.items()
}
