"""Contact sheet of one generated TouchSafeBench clip for the README (paper 003, App. E views).

Rows: the clip's time points; columns: arm, head, third-person robot, third-person human RGB,
the arm's colourised depth; last column: the clip's top-down input (overhead frame + map).
Everything comes from the dataset through robosafe's own readers (clip_images, topdown_image).

Run:  python scripts/make_grounding_sheet.py DATASET docs/img/grounding_generate_sheet.jpg
      (DATASET from `robosafe grounding generate -o DATASET -n 4 --seed 3 --size 128`)
"""

from __future__ import annotations

import argparse
import io

from PIL import Image

from robosafe.grounding.dataset import index_dataset
from robosafe.grounding.representations import clip_images, topdown_image
from robosafe.grounding.sampler import candidate_clips


def _img(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("out")
    ap.add_argument("--sample-type", default="human_collision_risk")
    args = ap.parse_args()
    idx = index_dataset(args.dataset)
    clips = [c for task in (1, 2) for c in candidate_clips(idx.episodes, task)
             if c.sample_type == args.sample_type]
    if not clips:
        raise SystemExit(f"{args.dataset}: no {args.sample_type} clip")
    clip = clips[0].to_record()
    rgb = clip_images(clip, idx.root, "rgb", "all")
    depth = clip_images(clip, idx.root, "depth_color", ["arm"])
    top = _img(topdown_image(idx.root / clip["episode_dir"], clip["frames"]).data)
    n = len(clip["frames"])
    cells = [[_img(im.data) for im in rgb if im.time == t] +
             [_img(im.data) for im in depth if im.time == t] for t in range(1, n + 1)]
    w, h = cells[0][0].size
    top = top.resize((int(top.width * n * h / top.height), n * h))
    sheet = Image.new("RGB", (w * len(cells[0]) + top.width, h * n), "white")
    for r, row in enumerate(cells):
        for c, im in enumerate(row):
            sheet.paste(im.resize((w, h)), (c * w, r * h))
    sheet.paste(top, (w * len(cells[0]), 0))
    sheet.save(args.out, quality=85)
    print(f"{args.out}: {clip['sample_type']} clip {clip['clip_id']} of {clip['episode_dir']}, "
          f"frames {clip['frames']}")


if __name__ == "__main__":
    main()
