import sys

from kvcore.errors import KvError

try:
    from kvcore.cli.main import main
except ModuleNotFoundError as e:  # started with a Python that lacks the requirements (e.g. PyYAML)
    name = {"yaml": "PyYAML"}.get((e.name or "").split(".")[0], e.name)
    print(
        f"error: the Python package {name} is not installed; install the project's requirements: `python3 -m venv .venv"
        " && .venv/bin/pip install -r requirements.txt`, then run `.venv/bin/python -m kvcore`.",
        file=sys.stderr,
    )
    sys.exit(2)
except KvError as e:
    # a table that breaks its contract as kvcore loads (a runtime, a format, a family): one sentence
    print(f"error: kvcore cannot start: {e}", file=sys.stderr)
    sys.exit(2)

sys.exit(main())
