"""The replica registry seen from one replica, on a real PostgreSQL: who is live, found when asked."""

from __future__ import annotations

import anyio
import pytest

from mcpmux.policy import StateStore
from mcpmux.serve.cluster import REREAD_S, Cluster, Replica, ReplicaOptions

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.network, pytest.mark.peers]


async def test_a_replica_that_joined_after_the_last_heartbeat_is_found_when_a_request_names_it(
    shared_database: str,
) -> None:
    # A CI find: a session made on a replica that joined since its peer's last read of the registry was
    # answered "gone" (404), and the client lost its session while every replica was up.
    with StateStore(shared_database) as store:
        first = Cluster(store, ReplicaOptions("r1", "http://127.0.0.1:1"))
        second = Cluster(store, ReplicaOptions("r2", "http://127.0.0.1:2"))
        async with anyio.create_task_group() as tg:
            with anyio.fail_after(60):
                await tg.start(first.run)
                assert [r.id for r in first.peers()] == ["r1"]
                await tg.start(second.run)
                found = await first.lookup("r2")  # at once, not at r1's next heartbeat
                assert found is not None and found.advertise == "http://127.0.0.1:2"
                # A name no replica holds is looked for once and is not found; many such lookups share reads.
                reads = 0
                real = first._read_peers

                def counting() -> dict[str, Replica]:
                    nonlocal reads
                    reads += 1
                    return real()

                first._read_peers = counting  # type: ignore[method-assign,assignment]
                results: list[Replica | None] = []

                async def ask(name: str) -> None:
                    results.append(await first.lookup(name))

                async with anyio.create_task_group() as asking:
                    for index in range(50):
                        asking.start_soon(ask, f"made-up-{index}")
                assert results == [None] * 50
                assert 1 <= reads <= 3, f"{reads} reads of the registry for 50 made-up names"
                # Long after the last read: looked for at once.
                await anyio.sleep(REREAD_S * 1.5)
                assert await first.lookup("made-up-again") is None and reads <= 4
            tg.cancel_scope.cancel()
