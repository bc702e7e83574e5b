"""Run every benchmark (``bench/bench_*.py``) or the ones named: ``python bench/run.py [NAME...]``.

Each module has a ``main()`` that prints its table and writes ``bench/results/<name>.json``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    wanted = set(argv)
    modules = sorted(HERE.glob("bench_*.py"))
    failed = 0
    for path in modules:
        short = path.stem.removeprefix("bench_")
        if wanted and short not in wanted and path.stem not in wanted:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            module.main()
        except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the others' figures
            print(f"benchmark {path.stem} failed: {exc!r}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
