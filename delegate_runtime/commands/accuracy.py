"""`devicefarm accuracy`: task accuracy, as TFLite's evaluation tools print it.

    devicefarm accuracy classification --model M --images DIR --ground_truth_labels F
        --model_output_labels F [--num_images N] [--crop_fraction 0.875] ...
    devicefarm accuracy detection --model M --annotations COCO.json [--images DIR] ...
    devicefarm accuracy detection --detections RESULTS.json --annotations COCO.json

With --use_gpu the CPU reference runs too (unless --compare=false), and the delta is printed.
"""

from __future__ import annotations

import argparse
import sys

from ._flags import (
    add_bool,
    add_delegate_flags,
    add_output_flags,
    delegate_options,
    existing_dir,
    existing_file,
    non_negative_int,
    output_file,
    write_json,
)


def _common(p: argparse.ArgumentParser, crop: float) -> None:
    p.add_argument(
        "--num_images",
        type=non_negative_int,
        default=0,
        help="evaluate only the first N images (default: 0, all)",
    )
    pre = p.add_argument_group("preprocessing")
    pre.add_argument(
        "--crop_fraction",
        type=float,
        default=crop,
        help=f"central crop kept of each side before resizing (default: {crop})",
    )
    pre.add_argument(
        "--input_mean",
        type=float,
        default=127.5,
        help="float inputs are (pixel - mean) / std (default: 127.5)",
    )
    pre.add_argument(
        "--input_std", type=float, default=127.5, help="see --input_mean (default: 127.5)"
    )
    pre.add_argument(
        "--quantized_input",
        choices=("quantize", "raw"),
        default="quantize",
        help="int8/uint8 inputs: quantize the normalised floats with the input's scale and "
        "zero point, or raw pixels (uint8 as is, int8 minus 128) as TFLite's tools do "
        "(default: quantize)",
    )
    add_delegate_flags(p)
    add_bool(
        p,
        "--compare",
        True,
        "with --use_gpu, also run the CPU reference and print both and the delta",
    )
    add_output_flags(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Task accuracy: image classification top-K (K = 1..10) over an ILSVRC-style "
        "folder, or COCO detection mAP (IoU .50:.95 and .50) for SSD-style outputs."
    )
    sub = p.add_subparsers(dest="task", metavar="TASK", required=True)
    c = sub.add_parser(
        "classification",
        help="top-K accuracy over an ILSVRC-style image folder",
        description="Top-K accuracy (K = 1..10): images sorted by file name, one ground-"
        "truth label per image (same order), one model output label per output index.",
    )
    c.add_argument(
        "--model", required=True, type=existing_file, help="path to a .tflite classifier"
    )
    c.add_argument(
        "--images", required=True, type=existing_dir, metavar="DIR", help="folder of images"
    )
    c.add_argument(
        "--ground_truth_labels",
        required=True,
        type=existing_file,
        metavar="FILE",
        help="one label per image, in sorted file-name order",
    )
    c.add_argument(
        "--model_output_labels",
        required=True,
        type=existing_file,
        metavar="FILE",
        help="one label per model output index",
    )
    _common(c, 0.875)
    d = sub.add_parser(
        "detection",
        help="COCO mAP of an SSD-style detector (boxes, classes, scores, count)",
        description="COCO bbox mAP (IoU .50:.95, .50, .75) of an SSD-style detector, or of "
        "precomputed COCO results (--detections). Decoding: see docs/tools.md.",
    )
    src = d.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=existing_file, help="path to a .tflite detector")
    src.add_argument(
        "--detections",
        type=existing_file,
        metavar="FILE",
        help="evaluate COCO results json ([{image_id, category_id, bbox, score}]) instead",
    )
    d.add_argument(
        "--annotations",
        required=True,
        type=existing_file,
        metavar="FILE",
        help="COCO instances json",
    )
    d.add_argument(
        "--images",
        type=existing_dir,
        metavar="DIR",
        default=None,
        help="folder of the annotation file's images (default: the file's folder)",
    )
    d.add_argument(
        "--class_offset",
        type=int,
        default=0,
        help="added to each class index before mapping to a category (default: 0)",
    )
    d.add_argument(
        "--label_map",
        type=existing_file,
        metavar="FILE",
        default=None,
        help="one COCO category id per line, per class index (default: the sorted ids)",
    )
    d.add_argument(
        "--detections_out",
        type=output_file,
        metavar="FILE",
        default=None,
        help="write the test run's detections as COCO results json (default: none)",
    )
    _common(d, 1.0)


def _preprocess(args: argparse.Namespace):
    from ..tools.accuracy.preprocess import Preprocess

    pre = Preprocess(args.crop_fraction, args.input_mean, args.input_std, args.quantized_input)
    pre.validate()
    return pre


def _label_map(path: str | None) -> list[int] | None:
    from ..errors import JobError
    from ..tools.accuracy.imagenet import read_lines

    if path is None:
        return None
    try:
        return [int(line) for line in read_lines(path, "label map") if line]
    except ValueError as exc:
        raise JobError(f"label map {path} must hold one integer category id per line") from exc


def _evaluate_file(args: argparse.Namespace, data) -> int:
    import json

    from ..errors import JobError
    from ..tools.accuracy.coco import evaluate_detections

    try:
        with open(args.detections, encoding="utf-8") as f:
            dets = json.load(f)
        metrics = evaluate_detections(data, dets)
    except OSError as exc:
        raise JobError(f"cannot read detections {args.detections}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise JobError(f"detections {args.detections} are not COCO results: {exc}") from exc
    sys.stdout.write(metrics.format())
    if args.json:
        write_json(args.json, {"task": "detection", "metrics": metrics.to_dict()})
    return 0


def run(args: argparse.Namespace) -> int:
    from ..tools.accuracy.evaluate import run_accuracy
    from ..tools.benchmark import BenchmarkOptions
    from ..tools.progress import progress_mode

    pre = _preprocess(args)
    options = BenchmarkOptions(**delegate_options(args))
    if args.task == "classification":
        from ..tools.accuracy.imagenet import load_dataset

        data = load_dataset(
            args.images, args.ground_truth_labels, args.model_output_labels, args.num_images
        )
        result = run_accuracy(
            "classification",
            args.model,
            data,
            options,
            preprocess=pre,
            compare=args.compare,
            progress=progress_mode(args.progress),
            out=sys.stdout,
        )
    else:
        from ..tools.accuracy.coco import load_coco
        from ..tools.accuracy.detection import Decoding

        data = load_coco(args.annotations, args.images)
        if args.detections:
            return _evaluate_file(args, data)
        result = run_accuracy(
            "detection",
            args.model,
            data,
            options,
            preprocess=pre,
            decoding=Decoding(args.class_offset, _label_map(args.label_map)),
            num_images=args.num_images,
            compare=args.compare,
            progress=progress_mode(args.progress),
            out=sys.stdout,
        )
        if args.detections_out:
            write_json(args.detections_out, result.detections)
    if args.json:
        write_json(args.json, result.to_dict())
    return 0
