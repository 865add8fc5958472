"""`devicefarm make-dataset`: write a small labelled synthetic dataset.

devicefarm make-dataset classification --out DIR [--num_classes 4] [--with_model]
devicefarm make-dataset detection --out DIR [--num_images 8] [--with_model]
"""

from __future__ import annotations

import argparse

from ._flags import add_bool, non_negative_int


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    c.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    c.add_argument("--num_classes", type=int, default=4, help="2 to 12 colours (default: 4)")
    c.add_argument(
        "--images_per_class", type=int, default=5, help="images of each class (default: 5)"
    )
    c.add_argument("--size", type=int, default=64, help="image side in pixels (default: 64)")
    c.add_argument(
        "--noise", type=float, default=60.0, help="pixel noise standard deviation (default: 60)"
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
    d.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    d.add_argument("--num_images", type=int, default=8, help="number of images (default: 8)")
    d.add_argument("--width", type=int, default=128, help="image width (default: 128)")
    d.add_argument("--height", type=int, default=96, help="image height (default: 96)")
    d.add_argument(
        "--max_objects", type=int, default=3, help="objects per image, at most (default: 3)"
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
