"""The quick-start example runs against real servers and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

from leafid_server import LeafidServer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "quickstart.py"


def test_the_quickstart_example_runs(shared_pair: List[LeafidServer]) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)] + [s.url for s in shared_pair],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "segment ids: [" in out and "refused: unknown_biz_tag" in out
    assert "asyncio snowflake id: " in out
