"""Run a recorded benchmark again from its YAML: every run's recorded command, then `record.py`.

    python benchmarks/run.py NAME             # print the commands it would run, run nothing
    python benchmarks/run.py NAME --run [--no-record]

NAME is a YAML here (`hotpotqa-dev100`, or a path to one). Each run's `command` is run as it was
recorded, from the repository's root: a path that named another checkout's `benchmarks/runs/`
names this one's, and a command that reads another run's folder (`--zero-shot-from`,
`--replay-from`, a replay's or a re-pick's source) runs after the run that writes it. A run whose
folder is finished (`summary.json`, `report.json`, or an optimize run's compiled side) is skipped,
and an unfinished one resumes, so running this again picks up where it stopped. Then `record.py
NAME` records the runs with the YAML's pairs and note, and rebuilds docs/results.md. Without
`--run` it prints the commands and runs nothing: a YAML is a file anyone may have edited, so what
it would run is read first, and only treeqa's own commands (`treeqa ...`, `python optimize.py ...`)
are run at all. Runs are timed one at a time: their folders' `NOTES.md` say what ran beside them.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OTHER_CHECKOUT = re.compile(r"^/\S*?/(benchmarks/runs/)")  # /work/main/benchmarks/runs/x -> benchmarks/runs/x


@dataclass
class Step:
    """One recorded run: its command (as arguments) and the folder it writes (None: it names none)."""

    args: list[str]
    out: str | None

    def finished(self) -> bool:
        """Whether its folder holds a finished run (an optimize run's compiled side counts, as record.py
        records one whose zero-shot side is unfinished)."""
        done = ("summary.json", "report.json", "compiled/summary.json")
        return self.out is not None and any((ROOT / self.out / f).is_file() for f in done)

    def reads(self, folder: str) -> bool:
        return any(a == folder or a.startswith(folder + "/") for a in self.args if a != self.out)


def _out(args: list[str]) -> str | None:
    if "--out" in args[:-1]:
        return args[args.index("--out") + 1]
    if args[:2] == ["treeqa", "repick"] and len(args) >= 4:  # treeqa repick RUN OUT
        return args[3]
    return None


def _folder(entry: dict, out: str) -> str:
    """The folder the entry's run is in now: a run renamed after it finished (two runs of one
    command kept apart, `iterretgen-no-retry`) is named by the entry's `run`, or, in files older
    than that field, found by the command its summary records."""
    parent = Path(out).parent
    if entry.get("run"):
        return str(parent / entry["run"])
    if not (ROOT / out).exists():
        for summary in sorted((ROOT / parent).glob("*/summary.json")) + sorted((ROOT / parent).glob("*/report.json")):
            if yaml.safe_load(summary.read_text()).get("command") == entry["command"]:
                return str(parent / summary.parent.name)
    return out


def step_of(entry: dict) -> Step:
    """An entry's command, its paths in this checkout and its folder where the run is now."""
    args = [OTHER_CHECKOUT.sub(r"\1", a) for a in shlex.split(str(entry["command"]))]
    out = _out(args)
    if out is None:
        return Step(args, None)
    folder = _folder(entry, out)
    return Step([folder if a == out else a for a in args], folder)


def steps_of(doc: dict) -> list[Step]:
    """The YAML's commands, each once, in an order where a run comes after the runs it reads."""
    steps: list[Step] = []
    for entry in doc.get("runs") or []:
        step = step_of(entry)
        if all(s.args != step.args for s in steps):
            steps.append(step)
    ordered: list[Step] = []
    while steps:  # the first step that reads no folder a remaining step writes
        ready = next((s for s in steps if not any(o is not s and o.out and s.reads(o.out) for o in steps)), steps[0])
        ordered.append(ready)
        steps.remove(ready)
    return ordered


def record_args(name: str, doc: dict, steps: list[Step]) -> list[str]:
    """`record.py NAME RUN... --pair A:B ... --note NOTE` for the YAML's runs, pairs and note."""
    pairs = [arg for key in doc.get("comparisons") or {} for arg in ("--pair", key.replace(" vs ", ":", 1))]
    return [sys.executable, str(HERE / "record.py"), name, *[s.out for s in steps], *pairs,
            "--note", " ".join(str(doc.get("note") or "").split())]


def command(args: list[str]) -> list[str]:
    """What runs a recorded command here: `treeqa` from this Python's environment, `optimize.py`
    (or `python optimize.py`) with this Python; anything else a YAML names is refused."""
    if Path(args[0]).name == "__main__.py":  # recorded by `python -m treeqa.cli` in a frozen checkout
        args = ["treeqa", *args[1:]]
    if args[0] == "treeqa":
        script = Path(sys.executable).with_name("treeqa")
        return [str(script) if script.is_file() else "treeqa", *args[1:]]
    if Path(args[0]).name.startswith("python") and args[1:2] == ["optimize.py"]:
        args = args[1:]
    if Path(args[0]).name == "optimize.py":
        return [sys.executable, *args]
    raise ValueError(f"refused: {shlex.join(args)[:120]} is not a treeqa command (treeqa ..., python optimize.py ...)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="a YAML in benchmarks/ (without .yaml), or a path to one")
    parser.add_argument("--run", action="store_true", help="run the commands (without it: print them, run nothing)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing (the default)")
    parser.add_argument("--no-record", action="store_true", help="run the commands, leave the YAML as it is")
    args = parser.parse_args(argv)
    path = Path(args.name) if args.name.endswith(".yaml") else HERE / f"{args.name}.yaml"
    if not path.is_file():
        parser.error(f"no {path}; the recorded benchmarks: {', '.join(sorted(p.stem for p in HERE.glob('*.yaml')))}")
    doc = yaml.safe_load(path.read_text())
    steps = steps_of(doc)
    dry = args.dry_run or not args.run
    try:
        for step in steps:
            command(step.args)  # every command is treeqa's, or nothing runs
    except ValueError as exc:
        print(f"# {exc}", file=sys.stderr)
        return 2
    for step in steps:
        done = step.finished()
        print(("# finished, skipped: " if done else "") + shlex.join(step.args), flush=True)
        if not (done or dry) and (code := subprocess.run(command(step.args), cwd=ROOT).returncode):
            print(f"# stopped: that command exited {code}; run this again to resume", file=sys.stderr)
            return code
    if args.no_record:
        return 0
    if any(s.out is None for s in steps):
        print(f"# not recorded: {sum(s.out is None for s in steps)} command(s) name no run folder (--out)")
        return 0
    recording = record_args(path.stem, doc, steps)
    print(shlex.join(["python", str(Path(recording[1]).relative_to(ROOT)), *recording[2:]]), flush=True)
    if dry:
        print("# printed only: run again with --run to run these", flush=True)
        return 0
    return subprocess.run(recording, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
