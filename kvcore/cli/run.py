"""What every live command does around its measurement: check where the recording would go before
anything is measured, load the model under the memory guard, show a progress bar, print a table,
and save the run as one recording (atomic; never in read-only mode), with the command that made it.

Example: OPENBLAS_NUM_THREADS=1 python -m kvcore record --sections prefill,batch
-> command_line() returns that line; save(a, data) prints "saved recordings/local/....yaml".
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from kvcore.errors import KvError

# Environment variables that change what a run measures (which BLAS, how many threads): a run's
# command names them
TIMING_ENV = ("LD_PRELOAD", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "KVCORE_BLAS")


def command_line() -> str:
    """The exact command of this run, as a reader would type it, with the TIMING_ENV variables it
    ran under.

    Example: OPENBLAS_NUM_THREADS=1 python -m kvcore record --sections prefill,batch
    """
    argv = list(sys.argv)
    if argv and argv[0].endswith(("__main__.py", "kvcore")):
        argv = ["python", "-m", "kvcore", *argv[1:]]
    env = [f"{k}={shlex.quote(os.environ[k])}" for k in TIMING_ENV if os.environ.get(k)]
    return " ".join([*env, shlex.join(argv)])


def this_run_provenance() -> dict:
    """The provenance block of the run this process makes (kvcore.measure.machine.measured_provenance of its command)."""
    from kvcore.measure.machine import measured_provenance

    return measured_provenance(command_line())


class Bar:
    """A terminal progress bar (tqdm on stderr) behind the probes' progress(done, total, text)
    callback."""

    def __init__(self):
        self.bar = None

    def __call__(self, done: int, total: int, text: str) -> None:
        from tqdm import tqdm

        if self.bar is None or self.bar.total != total:
            self.close()
            self.bar = tqdm(
                total=total,
                file=sys.stderr,
                leave=False,
                disable=None,
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {elapsed}<{remaining}",
            )
        self.bar.set_description_str(text[:48].ljust(48), refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def with_bar(fn, *args, **kwargs):
    """fn(*args, progress=<a terminal bar>, **kwargs), the bar closed however fn ends."""
    bar = Bar()
    try:
        return fn(*args, progress=bar, **kwargs)
    finally:
        bar.close()


def load_model(a):
    """The model the command names; random weights are built only after the memory guard passes."""
    from kvcore.inputs.config import parse_config
    from kvcore.measure.caches import guard, kv_spec
    from kvcore.measure.models import get_model, guess_weights_bytes, is_loadable, resolve_config
    from kvcore.memory.formulas import kv_bytes
    from kvcore.runtimes.mlx_lm import MLX_LM

    weights = None if a.weights in (None, "") else a.weights
    if not (weights and weights != "random") and not (weights is None and is_loadable(a.model)):
        name, config = resolve_config(a.model)
        geometry = parse_config(config, name, MLX_LM)
        contexts = getattr(a, "contexts", None) or [
            getattr(a, "prompt_tokens", 32) + getattr(a, "new_tokens", 64)
        ]
        guard(
            guess_weights_bytes(a.model, weights, a.weights_format) or 0,
            kv_bytes(geometry, 1, kv_spec(a.kv_format or "fp32", "fp32")),
            max(contexts),
            model=name,
        )
    return get_model(a.model, weights, a.weights_format)


def print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    """columns: (key, header, format spec)."""
    widths = [max(len(h), 10) for _, h, _ in columns]
    print("  ".join(h.rjust(w) for (_, h, _), w in zip(columns, widths)))
    for row in rows:
        cells = []
        for (key, _, spec), w in zip(columns, widths):
            value = row.get(key)
            cells.append(("" if value is None else format(value, spec)).rjust(w))
        print("  ".join(cells))


def wants_save(a) -> bool:
    """record saves unless --no-save; the other commands save only with --save or --out."""
    return not a.no_save if a.command == "record" else bool(a.save or a.out)


def _out_folder(a) -> Path:
    from kvcore.recordings import store as recordings

    return Path(a.out).expanduser() if a.out else recordings.local_dir()


def check_destination(a) -> None:
    """Refuse, before anything is measured, a run whose recording could not be saved where it is
    asked to go."""
    if a.out and a.no_save:
        raise KvError("--no-save and --out contradict each other: give one of them.")
    if getattr(a, "save", False) and a.no_save:
        raise KvError("--no-save and --save contradict each other: give one of them.")
    if not wants_save(a):
        return
    from kvcore.recordings import store as recordings

    if recordings.read_only():
        return  # the run is measured and printed; save() says why nothing was written
    folder = _out_folder(a)
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise KvError(
            f"--out {folder}: {existing} is a file, not a folder; give a folder for the recording."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise KvError(
            f"--out {folder}: the folder {existing} cannot be written; give another folder."
        )


def checked(command):
    """Run `command` after the checks that need no measurement (where the recording would go)."""

    def run(a) -> int:
        check_destination(a)
        return command(a)

    return run


def save(a, data: dict, name: str | None = None) -> Path | None:
    """Save a built recording where the command asks (nothing unless it wants saving; nothing in
    read-only mode, said in one line); its path, or None."""
    from kvcore.measure.recording import save_run
    from kvcore.recordings import store as recordings

    if not wants_save(a):
        return None
    if recordings.read_only():
        print(f"read-only mode ({recordings.READ_ONLY_ENV}=1): the run was not saved.")
        return None
    try:
        path = save_run(data, _out_folder(a), name)
    except recordings.RecordingError as e:
        raise KvError(str(e)) from None
    print(f"saved {path}")
    return path


def save_sections(a, sections: dict, model: dict, method: dict) -> None:
    """Build one recording of a command's sections (labelled by what, which model and when, unless
    --label) and save it."""
    from kvcore.measure.recording import build_recording

    data = build_recording(
        sections,
        model,
        method,
        command_line(),
        getattr(a, "title", None),
        getattr(a, "label", None),
    )
    if not getattr(a, "label", None):  # runs of one command on one machine differ by these
        data["label"] = (
            f"{data['label']} — {', '.join(data['sections'])}, {model['name']}, "
            f"{data['provenance']['date'][:16]}"
        )
    save(a, data)


def show_and_save(
    a, section: str, rows: list[dict], columns: list, model: dict, method: dict, shown=None
) -> None:
    """Print a section's table (only the `shown` rows, if given), then save every row as the run's
    one section with its method."""
    print_table(rows if shown is None else shown, columns)
    save_sections(a, {section: rows}, model, {section: method})
