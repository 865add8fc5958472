"""Task accuracy: image classification top-K and COCO detection mAP, delegate vs reference.

- `preprocess`: image loading, central crop, resize, normalisation, quantized inputs.
- `imagenet`: ILSVRC-style folders, top-K (K = 1..10).
- `detection`: SSD-style outputs (boxes, classes, scores, count) decoded into COCO results.
- `coco`: COCO mean average precision (IoU .50:.95 and .50), as pycocotools computes it.
- `synthetic`: small labelled datasets (and a matching classifier) for tests and demos.
- `compare`: reference and delegate side by side, with the accuracy delta.
"""
