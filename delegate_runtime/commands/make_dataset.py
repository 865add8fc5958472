"""`devicefarm make-dataset`: write a small labelled synthetic dataset.

devicefarm make-dataset classification --out DIR [--num_classes 4] [--with_model]
devicefarm make-dataset detection --out DIR [--num_images 8] [--with_model]
"""

from __future__ import annotations

import argparse

from ._flags import (
    add_bool,
    int_at_least,
    int_between,
    non_negative_float,
    non_negative_int,
    output_folder,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..tools.accuracy.synthetic import COLOURS, MIN_CLASSIFICATION_SIZE, MIN_DETECTION_SIDE

    p.description = (
        "Write a small labelled synthetic dataset for the accuracy tools: an ILSVRC-style "
        "classification folder (with a matching colour classifier model) or COCO detection."
    )
    sub = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    c = sub.add_parser(
        "classification",
        help="noisy colour images, ground-truth and output label files, a classifier",
        description="Images of noisy colours with a distractor rectangle; labels are the "
        "colour names; classifier.tflite is a nearest-colour classifier.",
    )
    c.add_argument(
        "--out",
        required=True,
        type=output_folder,
        metavar="DIR",
        help="folder to write into: an existing one, or a new one in a folder that exists",
    )
    c.add_argument(
        "--num_classes",
        type=int_between(2, len(COLOURS)),
        default=4,
        help=f"2 to {len(COLOURS)} colours (default: 4)",
    )
    c.add_argument(
        "--images_per_class",
        type=int_at_least(1),
        default=5,
        help="images of each class (default: 5)",
    )
    c.add_argument(
        "--size",
        type=int_at_least(MIN_CLASSIFICATION_SIZE),
        default=64,
        help=f"image side in pixels, {MIN_CLASSIFICATION_SIZE} or more (default: 64)",
    )
    c.add_argument(
        "--noise",
        type=non_negative_float,
        default=60.0,
        help="pixel noise standard deviation (default: 60)",
    )
    c.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default: 0)")
    add_bool(c, "--with_model", True, "also write classifier.tflite")
    d = sub.add_parser(
        "detection",
        help="coloured rectangles with COCO annotations, an SSD-style detector",
        description="Images with 1..max_objects coloured rectangles (3 categories), "
        "annotations.json in COCO instances format, and detector.tflite: an SSD-style "
        "detector of the rectangles ending with TFLite_Detection_PostProcess.",
    )
    d.add_argument(
        "--out",
        required=True,
        type=output_folder,
        metavar="DIR",
        help="folder to write into: an existing one, or a new one in a folder that exists",
    )
    d.add_argument(
        "--num_images", type=int_at_least(1), default=8, help="number of images (default: 8)"
    )
    side = int_at_least(MIN_DETECTION_SIDE)
    d.add_argument(
        "--width",
        type=side,
        default=128,
        help=f"image width, {MIN_DETECTION_SIDE} or more (default: 128)",
    )
    d.add_argument(
        "--height",
        type=side,
        default=96,
        help=f"image height, {MIN_DETECTION_SIDE} or more (default: 96)",
    )
    d.add_argument(
        "--max_objects",
        type=int_at_least(1),
        default=3,
        help="objects per image, at most (default: 3)",
    )
    d.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default: 0)")
    add_bool(d, "--with_model", True, "also write detector.tflite")


def run(args: argparse.Namespace) -> int:
    from ..tools.accuracy import synthetic

    if args.kind == "classification":
        paths = synthetic.make_classification(
            args.out,
            args.num_classes,
            args.images_per_class,
            args.size,
            args.noise,
            args.seed,
            args.with_model,
        )
    else:
        paths = synthetic.make_detection(
            args.out,
            args.num_images,
            args.width,
            args.height,
            args.max_objects,
            args.seed,
            args.with_model,
        )
    for key, path in paths.items():
        print(f"{key}: {path}")
    return 0
