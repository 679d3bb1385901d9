"""Draw the conformance cases' pictures of time into docs/images (shown in docs/plots.md).

    python docs/make_plots.py [OUT_DIR]

Each case's input streams are bound as the conformance tests bind them
(``tests/conformance_cases.py``) and drawn with ``cti.plot.plot_time``, one PNG per case.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conformance_cases import bind_asa_case, bind_si_case, case_files, load  # noqa: E402

from cti import Application  # noqa: E402
from cti.plot import plot_time  # noqa: E402


def main(out: Path = ROOT / "docs" / "images") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in case_files("asa") + case_files("si"):
        case, app = load(path), Application()
        streams = ([bind_asa_case(case, app)] if path.name.startswith("asa")
                   else bind_si_case(case, app))
        target = out / f"{path.stem}.png"
        plot_time(streams, target, title=path.stem)
        written.append(target)
    return written


if __name__ == "__main__":
    for written in main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"):
        print(written.relative_to(ROOT) if written.is_relative_to(ROOT) else written)
