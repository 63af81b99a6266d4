"""Fault probe: what a user can do to grpo_ext by mistake or on purpose, each case run for real, as a table.

    python scripts/fault_probe.py [--only WORD] [--keep DIR]

Every case runs the command line (``python -m grpo_ext.cli ...``) in a folder of its own under one work folder, on
the tiny local model where a run is needed, and checks what the user must see: the exit status, one line and no
traceback for a fault the user met, the user's files byte for byte as they were, a forged pass refused, nothing
left hanging. Printed: one row a case (case, expected, got) and a last line with the number of defects; the exit
status is 1 when there is one. About five minutes on 2 CPU cores; ``--only WORD`` runs the cases whose name holds
WORD. The cases are the families a fault probe of the run directory, the sandbox, the judge, exit statuses,
outputs, input bounds and damaged files found defects in, with the defects themselves among them.
"""

import argparse
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CASES: list = []


def case(name: str, expected: str):
    def register(fn):
        CASES.append((name, expected, fn))
        return fn

    return register


@dataclass
class Ran:
    code: int
    out: str
    err: str
    seconds: float


def run(args: list[str], cwd: Path, timeout: float = 300, stdin: str | None = None) -> Ran:
    """A command, its exit status and output; a command past ``timeout`` is killed and reads as exit -9."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        return Ran(-9, out, err, time.monotonic() - t0)
    return Ran(proc.returncode, out, err, time.monotonic() - t0)


def grpo(*args: str, cwd: Path, timeout: float = 300, stdin: str | None = None) -> Ran:
    return run([PY, "-m", "grpo_ext.cli", *args], cwd, timeout, stdin)


def one_line(ran: Ran) -> str | None:
    """Why the refusal is not one line without a traceback, or None when it is."""
    if "Traceback" in ran.err or "Traceback" in ran.out:
        return "a traceback"
    errors = [line for line in ran.err.splitlines() if line.startswith("error")]
    if len(errors) != 1:
        return f"{len(errors)} error lines"
    return None


def said(ran: Ran) -> str:
    lines = [line for line in (ran.err or ran.out).strip().splitlines() if line.strip()]
    text = lines[-1] if lines else "(nothing)"
    return f"exit {ran.code}, {ran.seconds:.1f} s: {text[:150]}"


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its SHA-256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def refused(ran: Ran, code: int = 2) -> tuple[bool, str]:
    problem = one_line(ran)
    if ran.code != code:
        problem = f"exit {ran.code}"
    return problem is None, said(ran) if problem is None else f"{problem}; {said(ran)}"


# --- the work folder: a tiny model and a recipe for it ---------------------------------------------------------------


class Work:
    def __init__(self, root: Path):
        self.root = root
        self.model = root / "tiny"
        self._real_run: Path | None = None

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def recipe(self, folder: Path, output_dir: str, **sections) -> Path:
        doc = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
        doc["model"]["name"] = str(self.model)
        doc["training"].update(max_steps=2, per_device_train_batch_size=4, num_generations=4, max_completion_length=4,
                               save_steps=1, save_total_limit=1)  # fmt: skip
        doc["data"]["eval_prompts"] = doc["data"]["eval_prompts"][:2]
        doc["eval"]["samples"] = 2
        doc["health"] = {"preflight": "off"}
        doc["output_dir"] = output_dir
        for key, value in sections.items():
            if isinstance(value, dict) and isinstance(doc.get(key), dict):  # a key set to None is dropped
                doc[key] = {k: v for k, v in {**doc[key], **value}.items() if v is not None}
            else:
                doc[key] = value
        path = folder / "recipe.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def trained(self, folder: Path, output_dir: str = "run", **sections) -> Path:
        """A finished tiny run trained into ``folder/output_dir`` (a run directory is the run's only where it was
        trained: a copy proves nothing)."""
        ran = grpo("train", str(self.recipe(folder, output_dir, **sections)), cwd=folder)
        if ran.code != 0:
            raise RuntimeError(f"the tiny run failed: {said(ran)}")
        return folder / output_dir

    def real_run(self) -> Path:
        """One finished tiny run, trained once, to copy files from."""
        if self._real_run is None:
            self._real_run = self.trained(self.folder("real"), "runs/digit")
        return self._real_run


def user_project(folder: Path) -> Path:
    """A user's folder with files named like a run's (README.md, final/, runs/) and others."""
    (folder / "runs" / "exp1").mkdir(parents=True, exist_ok=True)
    (folder / "runs" / "exp1" / "data.csv").write_text("a,b\n1,2\n")
    (folder / "final").mkdir(exist_ok=True)
    (folder / "final" / "thesis.tex").write_text("\\section{Results}\n")
    (folder / "README.md").write_text("# My project\n")
    (folder / "notes.txt").write_text("keep me\n")
    return folder


# --- 1. the run directory: a marker proves a run, and only the run's own files are deleted -------------------------


def _marker_case(work: Work, name: str, plant, flag: list[str]) -> tuple[bool, str]:
    folder = work.folder(name)
    project = user_project(folder / "proj")
    plant(project)
    before = snapshot(project)
    ran = grpo("train", str(work.recipe(folder, "proj")), *flag, cwd=folder)
    after = snapshot(project)
    lost = sorted(set(before) - set(after)) + sorted(k for k in before if k in after and before[k] != after[k])
    if lost:
        return False, f"{said(ran)}; changed or deleted: {', '.join(lost)}"
    return refused(ran)


def _empty_marker(project: Path) -> None:
    (project / ".grpo_ext_run").write_text("")


for _flag in (["--overwrite"], ["resume=auto"]):

    @case(f"an empty marker in a project folder, {_flag[0]}", "exit 2, one line; the project untouched")
    def _(work, flag=_flag):
        return _marker_case(work, f"marker-empty{flag[0]}", _empty_marker, flag)

    @case(f"a run's marker copied into a project folder, {_flag[0]}", "exit 2, one line; the project untouched")
    def _(work, flag=_flag):
        real = work.real_run()
        return _marker_case(work, f"marker-copied{flag[0]}", lambda p: shutil.copy(real / ".grpo_ext_run", p), flag)

    @case(f"a run's summary.json and recipe.yaml copied for analysis, {_flag[0]}", "exit 2, one line; the project untouched")
    def _(work, flag=_flag):
        real = work.real_run()

        def plant(project):
            shutil.copy(real / "summary.json", project)
            shutil.copy(real / "recipe.yaml", project)

        return _marker_case(work, f"marker-summary{flag[0]}", plant, flag)


@case("a user's files put in a run directory, --overwrite", "trained again; the user's files kept")
def _(work):
    folder = work.folder("inside-run")
    work.trained(folder)
    (folder / "run" / "notes.txt").write_text("mine\n")
    (folder / "run" / "mine").mkdir()
    (folder / "run" / "mine" / "data.csv").write_text("1,2\n")
    ran = grpo("train", str(work.recipe(folder, "run")), "--overwrite", cwd=folder)
    kept = (folder / "run" / "notes.txt").is_file() and (folder / "run" / "mine" / "data.csv").is_file()
    return ran.code == 0 and kept, f"{said(ran)}; the user's files {'kept' if kept else 'DELETED'}"


@case("--resume with a checkpoint that is a symbolic link", "exit 2, one line; its target kept; no .lock left")
def _(work):
    folder = work.folder("symlink-checkpoint")
    run_dir = work.trained(folder)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["status"] = "running"  # an unfinished run, so that --resume has something to continue
    (run_dir / "summary.json").write_text(json.dumps(summary))
    newest = sorted(run_dir.glob("checkpoint-*"))[-1]
    elsewhere = folder / "elsewhere"
    shutil.move(str(newest), elsewhere)
    newest.symlink_to(elsewhere, target_is_directory=True)
    ran = grpo("train", str(work.recipe(folder, "run")), "--resume", cwd=folder)
    ok, got = refused(ran)
    stray = (run_dir / ".lock").exists()
    return ok and not stray and elsewhere.is_dir(), got + ("; a stray .lock" if stray else "")


@case("an output_dir on a read-only file system", "exit 2 or 1, one line")
def _(work):
    folder = work.folder("read-only")
    locked = folder / "locked"
    locked.mkdir(exist_ok=True)
    mounted = os.geteuid() == 0 and not subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(locked)]).returncode
    if not mounted:  # a user other than root cannot write into a folder of mode 0555
        locked.chmod(0o555)
    try:
        ran = grpo("train", str(work.recipe(folder, "locked/run")), cwd=folder)
    finally:
        if mounted:
            subprocess.run(["umount", str(locked)])
        locked.chmod(0o755)
    return refused(ran) if ran.code == 2 else refused(ran, 1)


@case("a full disk in the middle of a run", "exit 1, one line")
def _(work):
    if os.geteuid() != 0 or not shutil.which("mount"):
        return True, "skipped: needs root to mount a small tmpfs"
    folder = work.folder("full-disk")
    disk = folder / "disk"
    disk.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(disk)], capture_output=True).returncode:
        return True, "skipped: this machine refused a tmpfs"
    try:
        ran = grpo("train", str(work.recipe(folder, "disk/run")), cwd=folder)
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
    return refused(ran, 1)


# --- 2. code_tests: no forged pass ---------------------------------------------------------------------------------

FORGERIES = {
    "settings from /proc/self/cmdline": (
        "import json, os\nargs = open('/proc/self/cmdline', 'rb').read().split(b'\\0')\n"
        "s = json.loads(args[-2] or args[-1])\nos.write(s['fd'], s['token'].encode())\nos._exit(0)"
    ),
    "the caller's frame": (
        "import os, sys\nf = sys._getframe(1)\nwhile f:\n    loc = f.f_locals\n    if 'token' in loc and 'fd' in loc:\n"
        "        os.write(loc['fd'], loc['token'].encode())\n        os._exit(0)\n    f = f.f_back"
    ),
    "a value equal to everything": "class A:\n    def __eq__(self, o):\n        return True\ndef area(w, h):\n    return A()",
    "AssertionError replaced": "import builtins\nbuiltins.AssertionError = KeyError\ndef area(w, h):\n    return 0",
    "an atexit handler": "import atexit, os\natexit.register(lambda: os._exit(0))\ndef area(w, h):\n    return 0",
    "descriptors written by guess": (
        "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'x' * 32)\n    except OSError:\n"
        "        pass\nos._exit(0)"
    ),
}
for _what, _program in FORGERIES.items():

    @case(f"code_tests forged by {_what}", "code_tests: 0.0")
    def _(work, program=_program):
        ran = grpo("rewards", "score", "code_tests", "--completion", program, "--column", "tests=assert area(2, 3) == 6",
                   cwd=work.folder("forgery"))  # fmt: skip
        got = ran.out.strip()
        return ran.code == 0 and got.startswith("code_tests: 0.0"), said(ran) if not got else f"exit {ran.code}: {got}"


@case("code_tests: 60 files of 9 MB in a sandbox", "code_tests: 0.0 (stopped at disk_mb)")
def _(work):
    program = (
        "n = 0\ntry:\n    for i in range(60):\n        open(f'f{i}', 'wb').write(b'x' * (9 << 20))\n"
        "        n += 1\nexcept OSError:\n"
        "    pass\ndef written():\n    return n"
    )
    ran = grpo("rewards", "score", "code_tests", "--completion", program, "--column", "tests=assert written() == 60",
               cwd=work.folder("disk-bomb"))  # fmt: skip
    return ran.out.strip().startswith("code_tests: 0.0"), f"exit {ran.code}: {ran.out.strip() or said(ran)}"


@case("code_tests: tests on several lines from --column", "code_tests: 1.0")
def _(work):
    tests = "assert area(2, 3) == 6\nassert area(0, 5) == 0"
    program = "def area(w, h):\n    return w * h"
    ran = grpo("rewards", "score", "code_tests", "--completion", program, "--column", f"tests={tests}",
               cwd=work.folder("column"))  # fmt: skip
    return ran.out.strip() == "code_tests: 1.0", f"exit {ran.code}: {ran.out.strip() or said(ran)}"


# --- 3. a judge cannot hang a run ----------------------------------------------------------------------------------


class _Trickle(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (the standard library's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(3600):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(1)
        except OSError:
            pass

    do_GET = do_POST

    def log_message(self, *args):
        pass


def trickling_judge() -> str:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


@case("rewards score against a judge that trickles bytes, call_seconds: 2", "ends within 20 s")
def _(work):
    ran = grpo("rewards", "score", "llm_judge", "--completion", "4", "--arg", f"base_url={trickling_judge()}", "--arg", "model=m",
               "--arg", "call_seconds=2", cwd=work.folder("judge"), timeout=60)  # fmt: skip
    return ran.code != -9 and ran.seconds < 20, f"exit {ran.code} after {ran.seconds:.1f} s: {ran.out.strip()[:80]}"


@case("train against a judge that trickles bytes, call_seconds: 2", "one line within 60 s")
def _(work):
    folder = work.folder("judge-train")
    judge = {"name": "llm_judge", "args": {"base_url": trickling_judge(), "model": "m", "call_seconds": 2}}
    recipe = work.recipe(folder, "run", rewards=["digit_exact", judge], health={"preflight": "warn"})
    ran = grpo("train", str(recipe), cwd=folder, timeout=120)
    return (ran.code != -9 and ran.seconds < 60 and one_line(ran) is None), said(ran)


# --- 4. exit statuses tell the truth -------------------------------------------------------------------------------

REWARDS = """import os, sys

def hard(completions, **kwargs):
    os._exit(0)

def soft(completions, **kwargs):
    sys.exit(0)

def nan(completions, **kwargs):
    return [float("nan")] * len(completions)

def text(completions, **kwargs):
    return ["good"] * len(completions)
"""


@case("train with a reward that calls os._exit(0)", "exit 1, one line; summary.json: failed")
def _(work):
    folder = work.folder("exit-reward")
    (folder / "mine.py").write_text(REWARDS)
    ran = grpo("train", str(work.recipe(folder, "run", rewards=["./mine.py:hard"])), cwd=folder)
    status = (
        json.loads((folder / "run" / "summary.json").read_text()).get("status")
        if (folder / "run" / "summary.json").is_file()
        else "?"
    )
    ok, got = refused(ran, 1)
    return ok and status == "failed", f"{got}; summary.json: {status}"


WHAT = {"hard": "calls os._exit(0)", "soft": "calls sys.exit(0)", "nan": "scores NaN", "text": "scores a string"}
for _name in WHAT:

    @case(f"rewards score of a reward that {WHAT[_name]}", "exit 1, one line, as training says it")
    def _(work, name=_name):
        folder = work.folder("exit-score")
        (folder / "mine.py").write_text(REWARDS)
        return refused(grpo("rewards", "score", f"./mine.py:{name}", "--completion", "hi", cwd=folder), 1)


@case("doctor on a run whose summary.json is random bytes", "exit 1, not healthy")
def _(work):
    folder = work.folder("doctor")
    shutil.copytree(work.real_run(), folder / "run", dirs_exist_ok=True)
    (folder / "run" / "summary.json").write_bytes(os.urandom(200))
    ran = grpo("doctor", "run", cwd=folder)
    return ran.code != 0 and "verdict: healthy" not in ran.out, said(ran) if ran.code else f"exit 0: {ran.out.strip()[-100:]}"


# --- 5. files a command writes never replace the user's unasked ----------------------------------------------------


def _kept(folder: Path, ran: Ran, files: list[Path]) -> tuple[bool, str]:
    changed = [f.name for f in files if f.read_text() != "mine\n"]
    ok, got = refused(ran)
    return ok and not changed, got + (f"; REPLACED {', '.join(changed)}" if changed else "")


@case("filter --out naming a file that is there (and its .png)", "exit 2, one line; both files kept")
def _(work):
    folder = work.folder("filter-out")
    for name in ("rows.jsonl", "rows.png"):
        (folder / name).write_text("mine\n")
    recipe = work.recipe(folder, "run")
    ran = grpo("filter", str(recipe), "--out", "rows.jsonl", cwd=folder)
    return _kept(folder, ran, [folder / "rows.jsonl", folder / "rows.png"])


@case("schema --out naming a file that is there", "exit 2, one line; the file kept")
def _(work):
    folder = work.folder("schema-out")
    (folder / "notes.txt").write_text("mine\n")
    return _kept(folder, grpo("schema", "--out", "notes.txt", cwd=folder), [folder / "notes.txt"])


@case("eval --out naming a file that is there", "exit 2, one line; the file kept")
def _(work):
    folder = work.folder("eval-out")
    (folder / "report").write_text("mine\n")
    ran = grpo("eval", str(work.recipe(folder, "run")), "--model", str(work.model), "--out", "report", cwd=folder)
    return _kept(folder, ran, [folder / "report"])


@case("merge --out naming a file that is there", "exit 2, one line; the file kept")
def _(work):
    folder = work.folder("merge-out")
    lora = work.trained(folder, "run", model={"lora": {"r": 4, "lora_alpha": 8}})
    (folder / "merged").write_text("mine\n")
    return _kept(folder, grpo("merge", str(lora), "--out", "merged", cwd=folder), [folder / "merged"])


# --- 6. counts and files that could hang a run ---------------------------------------------------------------------


@case("data.size: 99999999999999999999", "exit 2, one line, no traceback")
def _(work):
    folder = work.folder("huge-size")
    data = {"source": "arith", "size": 99999999999999999999, "prompts": None, "eval_prompts": None}
    recipe = work.recipe(folder, "run", data=data)
    return refused(grpo("validate", str(recipe), cwd=folder, timeout=60))


@case("training.max_steps with 300 digits", "exit 2, one line, no traceback")
def _(work):
    folder = work.folder("huge-steps")
    recipe = work.recipe(folder, "run")
    text = recipe.read_text().replace("max_steps: 2", "max_steps: " + "9" * 300)
    recipe.write_text(text)
    return refused(grpo("validate", str(recipe), cwd=folder, timeout=60))


@case("a named pipe as data.file", "exit 2, one line, no traceback")
def _(work):
    folder = work.folder("fifo")
    fifo = folder / "rows.jsonl"
    if not fifo.exists():
        os.mkfifo(fifo)
    recipe = work.recipe(folder, "run", data={"file": "rows.jsonl", "prompts": None})
    return refused(grpo("validate", str(recipe), cwd=folder, timeout=30))


for _what, _bytes in {"empty": b"", "truncated": b"PAR1\x15\x04\x15", "random bytes": os.urandom(64)}.items():

    @case(
        f"a parquet data.file: {_what}",
        "exit 2, one line, no traceback",
    )
    def _(work, content=_bytes, what=_what):
        folder = work.folder(f"parquet-{what.replace(' ', '-')}")
        (folder / "rows.parquet").write_bytes(content)
        recipe = work.recipe(folder, "run", data={"file": "rows.parquet", "prompts": None})
        return refused(grpo("validate", str(recipe), cwd=folder, timeout=60))


# --- 7. a user's tool or environment is refused quickly ------------------------------------------------------------

TOOL = 'def weather(city: str, days: int) -> str:\n    """The weather.\n\n    Args:\n        city: The city.\n    """\n'
TOOL += '    return "sun"\n'  # days has no Args line
GAME = "class Guess:\n    def guess(self, number: int) -> str:\n"
GAME += '        """Guess.\n\n        Args:\n            number: A number.\n        """\n'
GAME += "        return 'higher'\n"  # no reset


for _what, _source, _key in (("a tool of one's own", TOOL, "tools"), ("an environment without reset", GAME, "environment")):

    @case(f"validate of {_what}", "exit 2, one line; neither torch nor transformers imported")
    def _(work, source=_source, key=_key, what=_what):
        folder = work.folder(f"agent-{key}")
        (folder / "mine.py").write_text(source)
        value = ["./mine.py:weather"] if key == "tools" else "./mine.py:Guess"
        recipe = work.recipe(folder, "run", **{key: value})
        ran = run([PY, "-X", "importtime", "-m", "grpo_ext.cli", "validate", str(recipe)], folder, 60)
        heavy = [m for m in ("transformers", "torch") if f"| {m}\n" in ran.err or f"|   {m}\n" in ran.err]
        ran.err = "\n".join(line for line in ran.err.splitlines() if not line.startswith("import time:"))
        ok, got = refused(ran)
        return ok and not heavy, got + (f"; imported {', '.join(heavy)}" if heavy else "")


# --- 9. a reward that does not depend on the machine's load -------------------------------------------------------


@case("math_accuracy of an answer math-verify cannot finish", "math_accuracy: None (not judged)")
def _(work):
    ran = grpo("rewards", "score", "math_accuracy", "--completion", "\\boxed{10^{100000000}+1}", "--answer", "1",
               cwd=work.folder("math"), timeout=120)  # fmt: skip
    return ran.out.startswith("math_accuracy: None"), f"exit {ran.code}: {ran.out.strip()[:120] or said(ran)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the cases whose name holds this text")
    parser.add_argument("--keep", type=Path, help="the work folder, kept afterwards (default: a temporary one, removed)")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="grpo_ext_probe_"))
    root.mkdir(parents=True, exist_ok=True)
    work = Work(root.resolve())
    subprocess.run([PY, "-m", "grpo_ext.tiny", str(work.model)], check=True, capture_output=True)
    chosen = [(n, e, f) for n, e, f in CASES if not args.only or args.only in n]
    defects = 0
    print(f"{'case':<72} {'expected':<48} {'ok':<3} got")
    try:
        for name, expected, fn in chosen:
            try:
                ok, got = fn(work)
            except Exception as exc:  # a case that could not be set up is a defect of the probe, shown as such
                ok, got = False, f"the case failed to run: {type(exc).__name__}: {exc}"
            defects += not ok
            print(f"{name:<72} {expected:<48} {'ok' if ok else 'NO':<3} {got}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{len(chosen)} cases, {defects} defects")
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
