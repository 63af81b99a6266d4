"""The ``push`` verb: publish a finished run's model, or its LoRA adapter, on the Hugging Face Hub with a model card.

    grpo-ext push RUN_DIR OWNER/NAME [--private] [--revision BRANCH] [--dry-run]
    grpo_ext.push("runs/digit", "me/digit-grpo", dry_run=True)

What goes up is the run's ``final/`` folder, after two additions made there: ``README.md``, the model card written
from the run's summary.json and recipe.yaml (``results/model_card.py``), and the run's plots, which the card shows.
A ``README.md`` of your own (one without the card's marker line) is uploaded as it is and never rewritten; the
blank template that peft saves beside an adapter is not yours, and is replaced.

Everything that needs no network is checked first: a finished run, a repo id of the form OWNER/NAME, the Hub not
switched off (``HF_HUB_OFFLINE``), a token (the environment variable ``token_env``, else huggingface_hub's own
login). The first request asks the Hub whose token it is, under a short timeout: huggingface_hub's client waits
without a limit, so a Hub that cannot be reached fails there, in seconds, with one line. Then
``HfApi.create_repo`` (an existing repo is reused) and one ``upload_folder`` commit.
"""

import os
import re
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from grpo_ext.core import console
from grpo_ext.core.errors import RecipeError, RunError
from grpo_ext.core.files import temporary_beside, write_atomic
from grpo_ext.core.text import connection_cause, first_line, plural
from grpo_ext.results import model_card
from grpo_ext.run import rundir

CARD = "README.md"
# The Hub answers whoami in a fraction of a second. httpx and requests apply the timeout to each phase (the
# connection, then the answer): 3 s keeps a push to a Hub that cannot be reached, interpreter start included, under 5 s.
PROBE_SECONDS = 3.0
# Hidden files are never uploaded: the temporary file a kill left behind (.NAME.PID.HEX), huggingface_hub's .cache/.
HIDDEN = [".*", "*/.*"]
# Lines of huggingface_hub's model card template, which peft fills in (barely) when it saves an adapter.
TEMPLATE = ("<!-- Provide a quick summary of what the model is/does. -->", "[More Information Needed]")
SAVED_TOGETHER_SECONDS = 60  # a template card this close in time to the model's config was saved with it, untouched
LOGIN = "`hf auth login`"


@dataclass(frozen=True)
class Upload:
    """What a push sends, or on a dry run would send."""

    repo_id: str
    folder: Path
    files: list[tuple[str, int]]  # (path in the repo, bytes)
    card: str  # "written" (grpo_ext's card) or "kept" (the README.md that was there)
    private: bool
    revision: str | None
    endpoint: str  # the Hub's address (HF_ENDPOINT)
    token: str  # where the token comes from, or what to do when there is none
    url: str | None = None  # the commit's address once uploaded; None on a dry run

    def lines(self, card_lines: int = 12) -> list[str]:
        """What a dry run prints: the repo, each file with its size, the card's first lines."""
        total = sum(size for _, size in self.files)
        visibility = "private" if self.private else "public"
        lines = [
            "push --dry-run: nothing uploaded; a push would send",
            f"  to     {self.endpoint}/{self.repo_id} ({visibility} if it is created), branch {self.revision or 'main'}",
            f"  from   {self.folder}: {plural(len(self.files), 'file')}, {size_text(total)}",
            f"  token  {self.token}",
        ]
        width = max(len(name) for name, _ in self.files)
        note = {"written": "  the model card grpo_ext wrote", "kept": "  your own card, kept as it is"}[self.card]
        for name, size in self.files:
            lines.append(f"    {name:<{width}}  {size_text(size):>10}" + (note if name == CARD else ""))
        card = (self.folder / CARD).read_text(encoding="utf-8", errors="replace").splitlines()
        lines.append(f"{self.folder / CARD}, first {min(card_lines, len(card))} of {len(card)} lines:")
        return lines + [f"    {line}".rstrip() for line in card[:card_lines]]


def size_text(n: int) -> str:
    """``716 B``, ``5.6 KiB``, ``1.27 GiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{n} B"


def finished(run_dir: Path) -> Path:
    """The ``final/`` folder of a run that has finished, holding a model or a LoRA adapter; RecipeError otherwise."""
    if not run_dir.is_dir():
        raise RecipeError(f"{run_dir}: no such directory; give the run directory (a recipe's output_dir) of a trained run")
    summary = rundir.read_summary(run_dir)
    if not summary or not (run_dir / "recipe.yaml").is_file():
        raise RecipeError(
            f"{run_dir}: not a run directory (no summary.json and recipe.yaml); give a recipe's output_dir after training"
        )
    final, recipe, status = run_dir / "final", summary.get("recipe") or "RECIPE", summary.get("status")
    if status == "running":
        raise RecipeError(
            f"{run_dir}: summary.json says the run is still training (or was killed); push it once it has finished "
            f"(grpo-ext doctor {run_dir} tells which)"
        )
    unsaved = rundir.unsaved_final(run_dir)
    if unsaved is not None:
        raise RecipeError(f"{run_dir}: no final/ to push: {unsaved}; train with save_final: true to publish a model")
    if model_card.is_adapter(final):
        if not any((final / name).is_file() for name in ("adapter_model.safetensors", "adapter_model.bin")):
            raise RecipeError(f"{final}: adapter_config.json without the adapter's weights; train again: grpo-ext train {recipe}")
        return final
    weights = any(final.glob("*.safetensors")) or any(final.glob("pytorch_model*.bin"))
    if (final / "config.json").is_file() and weights:
        return final
    fix = f"train it first: grpo-ext train {recipe}"
    if status not in (None, "completed"):
        fix = f"the run ended {status}; finish it first: grpo-ext train {recipe} --resume (or fix it and train again)"
    raise RecipeError(f"{final}: no model or LoRA adapter to push; {fix}")


def check_repo_id(repo_id: str, run_dir: Path) -> None:
    """RecipeError unless ``repo_id`` is OWNER/NAME in the characters the Hub allows."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    example = f"e.g. your-name/{re.sub(r'[^A-Za-z0-9._-]+', '-', run_dir.resolve().name).strip('-.') or 'my-model'}"
    if repo_id.count("/") != 1:
        raise RecipeError(f"REPO_ID {repo_id!r}: give OWNER/NAME, your user or organization and the model's name, {example}")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise RecipeError(f"REPO_ID {repo_id!r} is not a Hub repo id: {first_line(str(exc))} ({example})") from None


def _is_ours(card: Path, folder: Path) -> bool:
    """Whether a README.md may be rewritten: grpo_ext's card (its marker line), or the template a library saved with
    the model and nobody edited since."""
    text = card.read_text(encoding="utf-8", errors="replace")
    if model_card.MARKER in text:
        return True
    config = folder / ("adapter_config.json" if model_card.is_adapter(folder) else "config.json")
    together = abs(card.stat().st_mtime - config.stat().st_mtime) < SAVED_TOGETHER_SECONDS
    return together and all(line in text for line in TEMPLATE)


def _copy_atomic(src: Path, dest: Path) -> None:
    tmp = temporary_beside(dest)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def prepare(run_dir: Path, final: Path, repo_id: str) -> str:
    """Put the card and the run's plots in ``final/``: "written", or "kept" when README.md is someone's own."""
    card = final / CARD
    if card.is_file() and not _is_ours(card, final):
        return "kept"
    write_atomic(card, model_card.model_card(run_dir, repo_id))
    for name in model_card.figures(run_dir):  # the card links them beside itself
        _copy_atomic(run_dir / name, final / name)
    return "written"


def listing(folder: Path) -> list[tuple[str, int]]:
    """(path in the repo, bytes) of every file ``upload_folder`` sends: all but the hidden ones (``HIDDEN``)."""
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            found.append((relative.as_posix(), path.stat().st_size))
    return found


def _token(token_env: str) -> tuple[str | None, str | None]:
    """(token, where it comes from): the environment variable ``token_env``, else huggingface_hub's login."""
    from huggingface_hub import get_token

    if os.environ.get(token_env):
        return os.environ[token_env], token_env
    token = get_token()
    return token, ("huggingface_hub's token (HF_TOKEN, or the one `hf auth login` saved)" if token else None)


def _network_errors() -> tuple[type[Exception], ...]:
    """The errors a request of huggingface_hub raises when the Hub cannot be reached or says no."""
    from huggingface_hub import errors

    found: list[type[Exception]] = [errors.HfHubHTTPError, errors.OfflineModeIsEnabled]
    # huggingface_hub talks through requests (before 1.0) or httpx; whichever it imported raises its own errors
    for module, name in (("requests", "RequestException"), ("httpx", "HTTPError"), ("httpx2", "HTTPError")):
        if module in sys.modules:
            found.append(getattr(sys.modules[module], name))
    return tuple(found)


def explain(exc: Exception, doing: str, endpoint: str, repo_id: str, token_env: str) -> str:
    """One line for a failed request: what failed, and what to do."""
    from huggingface_hub import errors

    if isinstance(exc, errors.OfflineModeIsEnabled):
        return f"push: the Hub is switched off here (HF_HUB_OFFLINE); unset HF_HUB_OFFLINE to push to {repo_id}"
    response = exc.response if isinstance(exc, errors.HfHubHTTPError) else None
    status = response.status_code if response is not None else None
    if status is not None:
        if status == 401:
            return f"push: the Hub refused the token (401 while {doing}); set {token_env} to a write token or run {LOGIN}"
        if status == 403:
            owner = repo_id.split("/")[0]
            return (
                f"push: the token may not write to {repo_id} (403 while {doing}); use a token with write access to "
                f"{owner!r}, or a repo under your own name"
            )
        said = getattr(exc, "server_message", None) or first_line(str(exc))
        return f"push: the Hub at {endpoint} answered {status} while {doing}: {first_line(said)[:200]}"
    return (
        f"push: cannot reach the Hub at {endpoint} while {doing} ({connection_cause(exc)}); check the network connection "
        f"(and HF_ENDPOINT, if set), then push again"
    )


def _whoami(api, token: str) -> str | None:
    """The token's user, asked under ``PROBE_SECONDS``. The header is written here: huggingface_hub's own
    (``build_hf_headers``) first fetches a registry from the Hub for its user agent, 3 s more when it hangs."""
    from huggingface_hub.utils import get_session, hf_raise_for_status

    headers = {"authorization": f"Bearer {token}"}
    response = get_session().get(f"{api.endpoint}/api/whoami-v2", headers=headers, timeout=PROBE_SECONDS)
    hf_raise_for_status(response)
    return response.json().get("name")


def _send(upload: Upload, token: str, token_env: str, message: str, log) -> str:
    """Create the repo (and branch) if missing and upload ``final/`` in one commit; the commit's address."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    repo_id, doing = upload.repo_id, "checking the token"
    try:
        user = _whoami(api, token)
        doing = f"creating {repo_id}"
        api.create_repo(repo_id, private=upload.private, exist_ok=True)
        if upload.private and not api.repo_info(repo_id).private:
            raise RunError(
                f"push: {repo_id} exists and is public; --private applies to a new repo only: make it private in its "
                f"settings on the Hub, or push to another name"
            )
        if upload.revision and not upload.revision.startswith("refs/"):
            doing = f"creating branch {upload.revision} of {repo_id}"
            api.create_branch(repo_id, branch=upload.revision, exist_ok=True)
        total = size_text(sum(size for _, size in upload.files))
        log(f"push: uploading {plural(len(upload.files), 'file')} ({total}) to {repo_id}" + (f" as {user}" if user else ""))
        doing = f"uploading to {repo_id}"
        info = api.upload_folder(
            folder_path=upload.folder,
            repo_id=repo_id,
            revision=upload.revision,
            commit_message=message,
            ignore_patterns=HIDDEN,
        )
    except _network_errors() as exc:
        raise RunError(explain(exc, doing, api.endpoint, repo_id, token_env)) from None
    return getattr(info, "commit_url", None) or str(info)


def push(
    run_dir: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    dry_run: bool = False,
    token_env: str = "HF_TOKEN",
    log=console.say,
) -> Upload:
    """Upload ``run_dir/final`` (the model or LoRA adapter, its tokenizer, a model card and the run's plots) to the
    Hub model repo ``repo_id`` (OWNER/NAME), created if missing (``private`` then), on branch ``revision`` (created
    if missing; default the repo's main branch). With ``dry_run`` the card and plots are put in ``final/`` and
    nothing is sent. The token is the environment variable ``token_env``, else huggingface_hub's login. Returns
    what was (or would be) uploaded, with the commit's address after an upload."""
    run = Path(run_dir)
    final = finished(run)
    check_repo_id(repo_id, run)
    from huggingface_hub import constants

    token, token_from = _token(token_env)
    if not dry_run:
        if constants.HF_HUB_OFFLINE:  # read once, when huggingface_hub was imported, as its own requests read it
            raise RunError(
                "push: the Hub is switched off here (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set); unset it to push, "
                "or pass --dry-run to see what would go up"
            )
        if not token:
            raise RunError(f"push: no Hugging Face token; set {token_env} to a write token or run {LOGIN}")
    card = prepare(run, final, repo_id)
    said = token_from or f"none found: set {token_env} or run {LOGIN} before pushing"
    upload = Upload(repo_id, final, listing(final), card, private, revision, constants.ENDPOINT, said)
    if dry_run:
        return upload
    url = _send(upload, token, token_env, f"Upload {run.resolve().name}, trained with grpo_ext", log)
    return replace(upload, url=url)


def cmd_push(args) -> None:
    upload = push(args.run_dir, args.repo_id, private=args.private, revision=args.revision, dry_run=args.dry_run)
    if args.dry_run:
        print("\n".join(upload.lines()))
    else:
        print(f"pushed {len(upload.files)} files to {args.repo_id}: {upload.url}")


def add_parser(subparsers) -> None:
    """``grpo-ext push RUN_DIR OWNER/NAME [--private] [--revision BRANCH] [--dry-run]``."""
    p = subparsers.add_parser(
        "push", help="publish a finished run's model (or LoRA adapter) on the Hugging Face Hub, with a card"
    )
    p.add_argument("run_dir", help="the run directory (output_dir) of a finished run; its final/ is uploaded")
    p.add_argument("repo_id", help="the Hub model repo, OWNER/NAME (created if missing); token: HF_TOKEN or `hf auth login`")
    p.add_argument("--private", action="store_true", help="create the repo private (an existing repo keeps its visibility)")
    p.add_argument("--revision", metavar="BRANCH", help="the branch to commit to, created if missing (default: main)")
    p.add_argument(
        "--dry-run", action="store_true", help="write the card; list the files and the card's first lines; send nothing"
    )
    p.set_defaults(fn=cmd_push)
