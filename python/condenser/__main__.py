"""The `condenser` command of the wheel (and `python -m condenser`): the same command line as the
Rust binary, run inside the extension."""
import sys

from . import _condenser


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    argv[0] = "condenser"
    try:
        code = _condenser.run_cli(argv)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        code = 130
    except (OSError, ValueError, RuntimeError) as e:
        sys.stderr.write(f"error: {e}\n")
        code = 1
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
