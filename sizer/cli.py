"""The `sizer` command line: thin wiring over the library.

Every command lives in `sizer/commands/`; this module assembles them and owns the one error path:
a SizerError (or a usage error, or a broken workload plugin) becomes one line on stderr and exit
code 2, no traceback unless --verbose is given.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import cast

try:  # typer >= 0.25 vendors click and raises its own copy's exceptions
    from typer import _click as click
except ImportError:  # older typer depends on click itself
    import click  # type: ignore[no-redef]  # same module, other location: only one branch runs
import typer

from sizer import __version__
from sizer.commands import calibrate as calibrate_cmd
from sizer.commands import catalog as catalog_cmd
from sizer.commands import colocate as colocate_cmd
from sizer.commands import data as data_cmd
from sizer.commands import disks as disks_cmd
from sizer.commands import disks_verify as disks_verify_cmd
from sizer.commands import gpumem as gpumem_cmd
from sizer.commands import merge as merge_cmd
from sizer.commands import model as model_cmd
from sizer.commands import probe as probe_cmd
from sizer.commands import qualify as qualify_cmd
from sizer.commands import report as report_cmd
from sizer.commands import sweep as sweep_cmd
from sizer.commands import workloads as workloads_cmd
from sizer.errors import SizerError
from workloads.plugins import PluginError

# Exit and Abort live in click or, where typer vendors click, in typer itself.
# (click's Exit, where present, is typer.Exit re-exported: both carry exit_code.)
_EXIT = cast("tuple[type[typer.Exit], ...]",
             tuple({getattr(click.exceptions, "Exit", None), getattr(typer, "Exit", None)} - {None}))
_ABORT = cast("tuple[type[BaseException], ...]",
              tuple({getattr(click.exceptions, "Abort", None), getattr(typer, "Abort", None)} - {None}))

_STATE = {"verbose": False}

app = typer.Typer(
    name="sizer",
    help=(
        "How many vCPUs, how much host RAM and which disk class does a GPU workload need, and which "
        "cloud instance is the cheapest one that does not slow the GPU down? sizer measures it.\n\n"
        "Example: sizer sweep --workloads resnet50-train --vcpus 2,4,8,16 --disks local-nvme,standard"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sizer {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show tracebacks and debug detail."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    _STATE["verbose"] = verbose
    if verbose:
        os.environ["SIZER_VERBOSE"] = "1"


disks_app = typer.Typer(help="Measure and emulate disks: fio probes and disk-class throttles.", no_args_is_help=True)
disks_app.command("probe")(disks_cmd.probe)
disks_app.command("verify")(disks_verify_cmd.verify)

data_app = typer.Typer(help="Generate synthetic datasets and pack them into shard formats.", no_args_is_help=True)
data_app.command("imagenet")(data_cmd.imagenet)
data_app.command("ptb")(data_cmd.ptb)
data_app.command("pack")(data_cmd.pack)

catalog_app = typer.Typer(help="GPU instance catalogs: built-in clouds and your own prices.", no_args_is_help=True)
catalog_app.command("list")(catalog_cmd.list_rows)
catalog_app.command("import-skypilot")(catalog_cmd.import_skypilot)

app.command("probe")(probe_cmd.probe)
app.command("calibrate")(calibrate_cmd.calibrate)
app.add_typer(disks_app, name="disks")
app.add_typer(data_app, name="data")
app.command("workloads")(workloads_cmd.list_workloads)
app.command("run")(sweep_cmd.run)
app.command("sweep")(sweep_cmd.sweep)
app.command("colocate")(colocate_cmd.colocate)
app.command("fit")(model_cmd.fit)
app.command("recommend")(model_cmd.recommend)
app.add_typer(catalog_app, name="catalog")
app.command("report")(report_cmd.report)
app.command("qualify")(qualify_cmd.qualify)
app.command("merge")(merge_cmd.merge)
app.command("gpumem")(gpumem_cmd.gpumem)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv or "-v" in argv
    try:
        # Not standalone, typer returns a command's typer.Exit code instead of raising it.
        code = app(args=argv, prog_name="sizer", standalone_mode=False)
        code = code if isinstance(code, int) else 0
        if code == 130:  # typer turns Ctrl-C into Exit(130); committed work is kept
            print("sizer: interrupted", file=sys.stderr)
        return code
    except (SizerError, PluginError) as exc:  # a broken workload plugin is named, as bad input is
        if verbose:
            traceback.print_exc()
        print(f"sizer: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        # `sizer` or `sizer disks` alone: show the help, as a person expects.
        click.echo(exc.ctx.get_help())
        return 0
    except click.exceptions.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        print(f"sizer: error: {exc.format_message()}{hint}", file=sys.stderr)
        return 2
    except _EXIT as exc:
        return exc.exit_code
    except _ABORT:
        print("sizer: interrupted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("sizer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
