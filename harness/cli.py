"""``tokbench``: the command line.

    tokbench run suites/smoke.yaml            # train every encoder, score every cell, write a report
    tokbench run SUITE --set budget.lr=1e-3 --limit 20 --out runs/x
    tokbench run SUITE --nproc 2              # 2 ranks under torchrun (docs/distributed.md)
    tokbench validate SUITE                   # check a suite, print the resolved config
    tokbench ls encoders|perturbations|sources|analyses|suites
    tokbench report RUN_DIR                   # re-render the report from results files only
    tokbench report RUN_A RUN_B --out DIR     # several runs (pieces of a scaling grid) merged
    tokbench compare RUN_A RUN_B --out DIR    # one report across runs
    tokbench perturb typo.keyboard --severity 0.05 --severity 0.2 --text "Hello world"
    tokbench sanity                           # causality / random-bytes / Markov-source probes
    tokbench data prepare SUITE               # fetch and build every source a suite needs

Bad input (a suite, a name, a value) is reported on one line with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from core.errors import UsageError
from core.files import NotRegularFile, open_regular


def suites_dir() -> Path:
    """The shipped suites: the checkout's ``suites/`` when run from source, else the installed
    ``suites`` package (package data of a plain ``pip install .``)."""
    src = Path(__file__).resolve().parent.parent / "suites"
    if src.is_dir():
        return src
    from importlib.resources import files

    return Path(str(files("suites")))


SUITES_DIR = suites_dir()


def find_suite(name: str) -> Path:
    """A suite path as given, or a shipped suite by name (``smoke`` → suites/smoke.yaml)."""
    if not name:
        raise UsageError("suite: the name is empty; give a suite file or a shipped suite's name")
    p = Path(name)
    if p.is_file():
        return p
    for cand in (SUITES_DIR / name, SUITES_DIR / f"{name}.yaml"):
        if cand.is_file():
            return cand
    # it exists but cannot be a suite (a directory, /dev/null): say so, not "not found"
    if p.is_dir():
        raise UsageError(f"suite {name}: is a directory, not a suite file")
    if p.exists():
        raise UsageError(f"suite {name}: is not a regular file")
    raise UsageError(f"suite file not found: {name}")


def load(args: argparse.Namespace) -> Any:
    from harness.config import load_suite

    return load_suite(find_suite(args.suite), getattr(args, "set", None) or ())


# ---------------------------------------------------------------------------------------------
# commands


def cmd_run(args: argparse.Namespace) -> int:
    from harness.pipeline.guards import check_limit, check_memory, check_out_dir
    from harness.pipeline.preflight import load_warning
    from harness.pipeline.run import Runner, RunOptions
    from harness.pipeline.summary import summary_table

    check_limit(args.limit)
    suite = load(args)
    check_out_dir(Path(args.out) if args.out else Path("runs") / suite.name)
    if not args.no_memory_check:
        check_memory(suite, args.device)
    if warn := load_warning():
        print(f"tokbench: {warn}", file=sys.stderr)
    opts = RunOptions(out=Path(args.out) if args.out else None, device=args.device, limit=args.limit,
                      prepare=not args.no_prepare, report=not args.no_report, progress=not args.quiet,
                      ranks=args.nproc or 1)
    if args.dry_run:
        from harness.pipeline.estimate import dry_run

        dry_run(suite, opts, emit=lambda line: print(line, flush=True))  # each line as it is known
        return 0
    t0 = time.perf_counter()
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if args.nproc is not None and args.nproc != 1 and world == 1:  # launch N torchrun ranks
        from harness.pipeline.launch import (
            launch,  # (already a rank of a torchrun job: --nproc is moot)
        )

        return launch(args.argv, args.nproc, opts.out or Path("runs") / suite.name)
    if world > 1:  # one rank of a torchrun job (docs/distributed.md)
        from harness.pipeline.distributed import is_rank0, run_distributed

        runner, root = run_distributed(suite, opts)
        if not is_rank0():
            return 0
    else:
        runner = Runner(suite, opts)
        root = runner.run()
    print(summary_table(runner.rows))
    print(f"\nrun directory: {root}  ({time.perf_counter() - t0:.0f} s)")
    if runner.report_path is not None:  # never announce a report this run did not write
        print(f"report:        {runner.report_path}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from harness.data.load import prepare_sources, source_context

    suite = load(args)
    prepare_sources(suite, source_context(suite, log=lambda s: print(s, file=sys.stderr)))
    print(f"data for suite '{suite.name}' is ready")
    return 0


def cmd_data_pack(args: argparse.Namespace) -> int:
    from harness.data.datapack import pack
    from harness.data.load import prepare_sources, source_context

    suite = load(args)
    ctx = source_context(suite, log=lambda s: print(s, file=sys.stderr))
    prepare_sources(suite, ctx)
    out = Path(args.out or f"{suite.name}-data.tar.gz")
    got = pack(suite, ctx.cache_dir, out, slim=args.slim, ctx=ctx)
    docs = f" and {len(got['documents'])} document file(s)" if got["documents"] else ""
    print(f"packed {got['files']} files of {len(got['packages'])} package(s){docs} into {out} ({got['bytes'] / 1e6:.1f} MB); "
          f"on the other machine: tokbench data unpack {out.name}")
    return 0


def cmd_data_unpack(args: argparse.Namespace) -> int:
    from harness.data.datapack import unpack
    from sources.fetch import default_cache_dir

    cache = Path(args.cache) if args.cache else default_cache_dir()
    got = unpack(Path(args.archive), cache, log=lambda s: print(s, file=sys.stderr))
    what = ", ".join([*got["packages"], *got["documents"]])
    print(f"unpacked {got['files']} files of {what} into {cache}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    import yaml

    from harness.pipeline.guards import check_memory
    from harness.pipeline.preflight import check_data

    suite = load(args)
    check_data(suite)  # data paths exist (a missing file fails here, not at run time)
    memory = [] if args.no_memory_check else check_memory(suite, "auto")
    print(yaml.safe_dump(suite.raw, sort_keys=False, allow_unicode=True).rstrip())
    if memory:
        print("\n" + "\n".join(f"# memory: {m}" for m in memory))
    print(f"\n# OK: suite '{suite.name}': {len(suite.encoders)} encoder(s) "
          f"({', '.join(e.label for e in suite.encoders)}), {len(suite.seeds)} seed(s), "
          f"{len(suite.data.eval)} eval set(s), {len(suite.perturbations)} perturbation cell(s), "
          f"{suite.n_cells()} cells")
    if suite.scaling is not None:
        sc = suite.scaling
        print(f"# scaling grid: {len(sc.selected())} of {len(sc.budgets)} budget(s) x {len(sc.ladder)} size(s) x "
              f"{len(suite.encoders)} encoder(s) = up to {len(sc.selected()) * len(sc.ladder) * len(suite.encoders)} "
              "models per seed, each scored on those cells (--dry-run lists refusals and time)")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    import dataclasses
    import inspect

    from harness.infra import plugins

    what = args.what.rstrip("s") if args.what != "analyses" else "analysis"
    if what == "suite":
        for p in sorted(SUITES_DIR.glob("*.yaml")):
            print(f"{p.stem:<16} {suite_description(p.read_text(encoding='utf-8'))}")
        return 0
    if what not in ("encoder", "perturbation", "source", "analysis"):
        raise UsageError(f"ls: unknown kind {args.what!r}; use encoders, perturbations, sources, analyses or suites")
    for name in plugins.known_names(what):  # type: ignore[arg-type]
        try:
            cls = plugins.resolve(what, name)  # type: ignore[arg-type]
        except Exception as e:  # a broken plugin must not hide the others
            print(f"{name:<24} (cannot load: {e})")
            continue
        target = cls.Config if what == "encoder" else cls
        full = plain_doc(inspect.getdoc(cls) or "")
        doc = full.split("\n\n")[0].replace("\n", " ")
        print(f"{name:<24} {doc}")
        if what == "perturbation":
            # the meaning of severity is the one thing a user must know about a perturbation
            sev = next((p for p in full.split("\n\n") if p.lstrip().lower().startswith("severity")), "")
            if sev:
                print("    " + " ".join(sev.split()))
        if args.verbose:
            for f in dataclasses.fields(target):
                if f.name in ("lang",):
                    continue
                default = f.default if f.default is not dataclasses.MISSING else (
                    f.default_factory() if f.default_factory is not dataclasses.MISSING else "required")
                print(f"    {f.name}: {f.type} = {default!r}")
    return 0


def plain_doc(doc: str) -> str:
    """A docstring as a terminal shows it: reST roles (``:class:`X```) and inline literals
    (````x````) lose their markup."""
    import re

    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    return doc.replace("``", "")


def suite_description(text: str) -> str:
    """The whole first paragraph of a suite file's leading comment (up to a blank ``#`` line or
    the first non-comment line), on one line."""
    words: list[str] = []
    for ln in text.splitlines():
        if not ln.startswith("#"):
            break
        body = ln[1:].strip()
        if not body:
            if words:
                break
            continue
        words.append(body)
    return " ".join(words)


def cmd_report(args: argparse.Namespace) -> int:
    from reports import render_run

    if len(args.run_dir) > 1:  # pieces of one grid (scaling sweeps run budget by budget): merged
        if not args.out:
            raise UsageError("report: several run directories need --out DIR for the merged report")
        args.run_dirs = args.run_dir
        return cmd_compare(args)
    options = report_options(args)  # bad numbers first: they need no run directory to be wrong
    run_dir = Path(args.run_dir[0])
    if not (run_dir / "results.csv").exists():
        raise UsageError(f"{run_dir}: no results.csv (not a finished tokbench run directory)")
    out = Path(args.out) if args.out else None
    with _writer_lock(out or run_dir):
        print(render_run(run_dir, out, **options))
    return 0


def _writer_lock(out: Path) -> Any:
    """The run-directory lock (harness/infra/lock.py) on the folder a report is written to, so a report
    never writes beside a live ``tokbench run`` on it (one line naming the holder instead)."""
    from harness.infra.lock import RunLock

    return RunLock(out)


MAX_BOOTSTRAP = 1_000_000  # 1000x the default; far beyond any CI's precision needs


def report_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``render_run`` / ``render_compare``, each number checked here so
    a bad one is a one-line usage error before any file is read, not a numpy error later."""
    if not 1 <= args.bootstrap <= MAX_BOOTSTRAP:  # above: a (n, K) array numpy cannot allocate
        raise UsageError(f"--bootstrap {args.bootstrap}: must be between 1 and {MAX_BOOTSTRAP:,} "
                         "(resamples per interval)")
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: must be >= 0")
    return {"n_boot": args.bootstrap, "seed": args.seed, "svg": not args.no_svg}


def cmd_compare(args: argparse.Namespace) -> int:
    from reports import render_compare

    options = report_options(args)
    dirs = [Path(d) for d in args.run_dirs]
    for d in dirs:
        if not (d / "results.csv").exists():
            raise UsageError(f"{d}: no results.csv (not a finished tokbench run directory)")
    with _writer_lock(Path(args.out)):
        print(render_compare(dirs, Path(args.out), **options))
    return 0


def cmd_perturb(args: argparse.Namespace) -> int:
    from harness.data.preview import preview

    if args.file:
        text = read_preview_file(Path(args.file))
    elif args.text is not None:
        text = args.text
    else:
        text = "The quick brown fox jumps over the lazy dog. Tokenizer-free models read bytes."
    from harness.config.overrides import parse_value

    params: dict[str, Any] = {}
    for kv in args.param or ():
        k, sep, v = kv.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"--param {kv!r}: expected key=value")
        # the suite loader and its limits, as for --set: a parse error or an alias bomb is one line
        params[k.strip()], _ = parse_value(v, f"--param {kv!r}")
    sev = args.severity or [0.0, 0.05, 0.2]
    print(preview(args.name, sev, text, args.seed, params, lang=args.lang,
                  plugin_paths=args.plugin_path or ()))
    return 0


MAX_PREVIEW_BYTES = 16 * 2**20  # a preview is for reading; 16 MiB is far more than a screen


def read_preview_file(path: Path) -> str:
    """``perturb --file``: a regular file of at most ``MAX_PREVIEW_BYTES``, else one line. Opened
    without blocking and checked on the open descriptor, so a FIFO neither hangs nor is read and
    a device (``/dev/zero``) is refused before a byte is read."""
    try:
        f = open_regular(path)
    except NotRegularFile as e:
        kind = e.kind if e.kind == "a directory" else f"not a regular file ({e.kind})"
        raise UsageError(f"--file {path}: {kind} (perturb reads a text file)") from None
    except OSError as e:
        raise UsageError(f"--file {path}: {e.strerror or e}") from None
    with f:
        data = f.read(MAX_PREVIEW_BYTES + 1)
    if len(data) > MAX_PREVIEW_BYTES:
        raise UsageError(f"--file {path}: larger than {MAX_PREVIEW_BYTES // 2**20} MiB; perturb previews "
                         "a sample: cut one out (head -c 100000)")
    return data.decode("utf-8", errors="surrogateescape")


def cmd_sanity(args: argparse.Namespace) -> int:
    from harness.sanity.command import run_sanity

    ok = run_sanity(encoders=args.encoder or None, device=args.device, quick=args.quick)
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------


def add_report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the scaling fit's intervals (default 1000, at most 400 used; the tables' CIs draw none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the scaling bootstrap and the permutation tests")
    p.add_argument("--no-svg", action="store_true", help="write PNG figures only")


def _version() -> str:
    from harness.infra.provenance import tokbench_version  # no torch: provenance imports it lazily

    return tokbench_version()


SUITE_HELP = "a suite file, or a shipped suite's name (tokbench ls suites)"
SET_HELP = "override a suite key, e.g. budget.lr=1e-3 (repeat)"
DEVICE_HELP = "where to compute (default auto: cuda when there is a GPU, else cpu)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tokbench", description="Robustness evaluation of tokenizer-free language models.")
    p.add_argument("--version", action="version", version=f"tokbench {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="train and score a suite, write results and a report")
    r.add_argument("suite", help=SUITE_HELP)
    r.add_argument("--out", help="run directory (default runs/<suite name>)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    r.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help=DEVICE_HELP)
    r.add_argument("--limit", type=int, help="at most N documents per eval set")
    r.add_argument("--dry-run", action="store_true", help="list models and cells with FLOPs and a time estimate")
    r.add_argument("--no-report", action="store_true",
                   help="write results only; render later with tokbench report RUN_DIR")
    r.add_argument("--no-prepare", action="store_true", help="do not fetch/build data sources first")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.add_argument("--no-memory-check", action="store_true",
                   help="skip the analytic training-memory guard (harness/infra/memory.py)")
    r.add_argument("--nproc", type=int, help="start N torchrun ranks (one per GPU; gloo on CPU)")
    r.set_defaults(fn=cmd_run)

    v = sub.add_parser("validate", help="check a suite and print it resolved")
    v.add_argument("suite", help=SUITE_HELP)
    v.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    v.add_argument("--no-memory-check", action="store_true",
                   help="skip the training-memory guard (e.g. a GPU suite checked on a laptop)")
    v.set_defaults(fn=cmd_validate)

    ls = sub.add_parser("ls", help="list encoders, perturbations, sources, analyses or suites")
    ls.add_argument("what", help="what to list", choices=["encoders", "perturbations", "sources", "analyses", "suites"])
    ls.add_argument("-v", "--verbose", action="store_true", help="show parameters")
    ls.set_defaults(fn=cmd_ls)

    rep = sub.add_parser("report", help="re-render the report of a run directory (several: merged, "
                         "e.g. the budget-by-budget pieces of a scaling grid)")
    rep.add_argument("run_dir", nargs="+", help="a run directory (one holding results.csv)")
    rep.add_argument("--out", help="output directory (default: the run directory; required for several)")
    add_report_options(rep)
    rep.set_defaults(fn=cmd_report)

    cmp_ = sub.add_parser("compare", help="one report across several run directories")
    cmp_.add_argument("run_dirs", nargs="+", help="run directories (each holding results.csv)")
    cmp_.add_argument("--out", required=True, help="output directory of the merged report")
    add_report_options(cmp_)
    cmp_.set_defaults(fn=cmd_compare)

    _add_perturb(sub)

    s = sub.add_parser("sanity", help="causality, random-bytes and Markov-source probes for every encoder "
                       "(minutes per encoder on a CPU; times: docs/method.md)")
    s.add_argument("--encoder", action="append", help="only these encoders (default: all registered)")
    s.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help=DEVICE_HELP)
    s.add_argument("--quick", action="store_true", help="leak probes only (causality; MDM leak for encoders with objective: mdm)")
    s.set_defaults(fn=cmd_sanity)

    _add_data(sub)
    return p


def _add_perturb(sub: Any) -> None:
    """``tokbench perturb``: a perturbation previewed at several severities."""
    pt = sub.add_parser("perturb", help="preview a perturbation at several severities")
    pt.add_argument("name", help="a perturbation (tokbench ls perturbations) or module:Class")
    pt.add_argument("--severity", type=float, action="append",
                    help="a severity to show (repeat; default 0, 0.05 and 0.2)")
    g = pt.add_mutually_exclusive_group()
    g.add_argument("--text", help="the text to perturb (default: a sample sentence)")
    g.add_argument("--file", help="a UTF-8 file to perturb")
    pt.add_argument("--seed", type=int, default=0, help="seed of the perturbation's rng (default 0)")
    pt.add_argument("--plugin-path", action="append", metavar="DIR",
                    help="a folder to look up a module:Class perturbation in, besides the working "
                         "directory (repeat)")
    pt.add_argument("--lang", help="ISO 639 code of the text (keyboard maps, morphology)")
    pt.add_argument("--param", action="append", metavar="KEY=VALUE", help="a perturbation parameter")
    pt.set_defaults(fn=cmd_perturb)


def _add_data(sub: Any) -> None:
    """``tokbench data prepare | pack | unpack``."""
    d = sub.add_parser("data", help="data commands")
    dsub = d.add_subparsers(dest="data_cmd", required=True)
    dp = dsub.add_parser("prepare", help="fetch and build every source a suite needs")
    dp.add_argument("suite", help=SUITE_HELP)
    dp.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    dp.set_defaults(fn=cmd_data)
    pk = dsub.add_parser("pack", help="prepare a suite's data and pack it into one archive (for a machine without network)")
    pk.add_argument("suite", help=SUITE_HELP)
    pk.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    pk.add_argument("--out", help="archive path (default <suite>-data.tar.gz)")
    pk.add_argument("--slim", action="store_true", help="only the files the sources read (python3.11-doc: 71 -> 20 MB); a source with a "
                    "document cache (debian_mix with dedup) travels as that one file instead of its packages")
    pk.set_defaults(fn=cmd_data_pack)
    up = dsub.add_parser("unpack", help="check a data archive's checksums and install it into the cache")
    up.add_argument("archive", help="an archive written by tokbench data pack")
    up.add_argument("--cache", help="cache directory (default $TOKBENCH_CACHE or ~/.cache/tokbench)")
    up.set_defaults(fn=cmd_data_unpack)


def stacks_on_sigusr1() -> bool:
    """``kill -USR1 PID`` makes a running tokbench print every thread's Python stack to stderr
    and go on (``faulthandler``): a run that seems stuck says where each thread waits without
    being stopped. Forked collation workers inherit the handler, so they answer the same signal.
    Returns whether it was registered (not on platforms without SIGUSR1)."""
    import faulthandler
    import signal

    if not hasattr(signal, "SIGUSR1"):
        return False
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True, chain=False)
    except (ValueError, OSError, AttributeError):  # stderr closed or not a real file
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stacks_on_sigusr1()
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what the --nproc launcher repeats
    try:
        return int(args.fn(args) or 0)
    except BrokenPipeError:  # `tokbench ls ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("tokbench: interrupted; finished models and cells are kept — run the same command to resume",
              file=sys.stderr)
        return 130
    except OSError as e:
        if isinstance(e, FileNotFoundError) and not os.environ.get("TOKBENCH_DEBUG"):
            print(f"tokbench: error: file not found: {e.filename or e}", file=sys.stderr)
            return 2
        if os.environ.get("TOKBENCH_DEBUG"):
            raise
        from harness.pipeline.guards import os_error_line

        print(f"tokbench: error: {os_error_line(e, args)}", file=sys.stderr)
        return 2
    except (ValueError, KeyError) as e:
        # ConfigError, PluginError and UsageError are ValueErrors: user input, not a bug.
        if os.environ.get("TOKBENCH_DEBUG"):
            raise
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, FileNotFoundError) and e.filename:
            msg = f"file not found: {e.filename}"
        print(f"tokbench: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
