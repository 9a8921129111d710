"""Command-line tools: `python -m fastpad check` (validation sweep), `python -m fastpad bench` (benchmark),
`python -m fastpad roofline` (an H100 roofline model of the benchmark suite) and `python -m fastpad info` (what a bug
report needs).

Run `python -m fastpad <command> --help` for the options. All four work from an installed package; none needs the
source checkout.
"""
import argparse
import sys

LAYERS_HELP = ("only layers whose name matches: globs anywhere in the name, '|' between alternatives "
               "(e.g. 'dw_k3*|stem'), or 're:REGEX'")
DEVICE_HELP = "device to run on (default: check uses cpu plus cuda if present; bench uses cuda if present, else cpu)"


def run_info(args: argparse.Namespace) -> int:
    from fastpad import _info

    return _info.main()


def run_check(args: argparse.Namespace) -> int:
    from fastpad import _check

    return _check.main(devices=[args.device] if args.device else None, quick=args.quick)


def run_bench(args: argparse.Namespace) -> int:
    from fastpad.bench import runner

    return runner.main(
        device=args.device, dtype=args.dtype, batch=args.batch, layers=args.layers,
        channels_last=args.channels_last, quick=args.quick, json_path=args.json, markdown_path=args.markdown,
        png_path=args.png, out_dir=args.out_dir, random_count=args.random, seed=args.seed, peers=args.peers)


def run_roofline(args: argparse.Namespace) -> int:
    from fastpad.bench import roofline

    return roofline.main(dtype=args.dtype, batch=args.batch, bandwidth_tbps=args.bandwidth, peak_tflops=args.peak,
                         layers=args.layers, markdown_path=args.markdown)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fastpad", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    info = commands.add_parser("info", help="print the versions, build, CPU features, threads and GPU for a bug report")
    info.set_defaults(run=run_info)

    check = commands.add_parser("check", help="validate fastpad against F.pad + F.conv* on every device present")
    check.add_argument("--device", help=DEVICE_HELP)
    check.add_argument("--quick", action="store_true",
                       help="one grouping (groups=1, groups=2 or depthwise) per configuration instead of all three")
    check.set_defaults(run=run_check)

    bench = commands.add_parser(
        "bench", help="time fastpad against F.pad + conv and torch's symmetric-padded conv",
        epilog="Without --json, --markdown or --png, all three are written to "
               "OUT_DIR/bench-<device>-<dtype>-<contiguous|channels_last>.{json,md,png}.")
    bench.add_argument("--device", help=DEVICE_HELP)
    bench.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float64"])
    bench.add_argument("--batch", type=int, help="batch size for every layer (default: each layer's own)")
    bench.add_argument("--layers", metavar="PATTERN", help=LAYERS_HELP)
    bench.add_argument("--random", type=int, metavar="N",
                       help="N random layers instead of the suite (1-3-d, dense/grouped/depthwise, transposed, every "
                            "padding form and mode, NCHW and channels_last; see fastpad/bench/random_layers.py)")
    bench.add_argument("--seed", type=int, help="the seed of --random (default: a fresh one, printed)")
    bench.add_argument("--channels-last", action="store_true", help="channels_last inputs and weights (2-d, 3-d)")
    bench.add_argument("--quick", action="store_true", help="fewer repeats")
    bench.add_argument("--peers", choices=["all", "none"], default="all",
                       help="all (default): also time torch.compile of F.pad + conv (compiled per layer and mode, "
                            "which takes seconds) and, on the CPU, onnxruntime (forward); none: skip both")
    bench.add_argument("--json", metavar="PATH", help="write the results as JSON")
    bench.add_argument("--markdown", metavar="PATH", help="write the results as a markdown table")
    bench.add_argument("--png", metavar="PATH",
                       help="write a bar chart of the time ratios (needs matplotlib: pip install matplotlib)")
    bench.add_argument("--out-dir", metavar="DIR",
                       help="folder of the default outputs, written when none of --json, --markdown and --png is "
                            "given (default: ./fastpad-bench)")
    bench.set_defaults(run=run_bench)

    roofline = commands.add_parser(
        "roofline", help="predict fastpad's best time ratio to F.pad + cuDNN per suite layer on an H100 (forward)",
        description="A roofline model of each suite layer: bytes and FLOPs, no timing and no GPU needed.")
    roofline.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    roofline.add_argument("--batch", type=int, default=256, help="batch size for every layer (default: 256)")
    roofline.add_argument("--bandwidth", type=float, metavar="TB/s",
                          help="memory bandwidth (default: 3.0, an H100 SXM's copy bandwidth, about 90%% of its "
                               "HBM3 peak)")
    roofline.add_argument("--peak", type=float, metavar="TFLOP/s",
                          help="compute peak (default: 989, the H100 SXM's dense bfloat16/float16 tensor-core peak; "
                               "float32 on tensor cores runs as TF32: pass its peak)")
    roofline.add_argument("--layers", metavar="PATTERN", help=LAYERS_HELP)
    roofline.add_argument("--markdown", metavar="PATH", help="also write the output, a markdown table, to PATH")
    roofline.set_defaults(run=run_roofline)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
