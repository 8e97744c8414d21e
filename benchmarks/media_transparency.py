"""Is the served copy of a video transparent? Generated clips that are hard for a codec (fine
noise scrolling, small text, smooth gradients, a zone plate in motion) are written losslessly,
put through ``av_prepare`` as an import does, and the served copy compared with the source
frame by frame: SSIM on the luma (Y) plane, the Gaussian-window formula of Wang et al. (2004:
11x11 window, sigma 1.5, K1 0.01, K2 0.03), computed here in numpy, and PSNR; with the CPU
time ``av_prepare`` took per frame (one thread) and the served size, for each x264 preset and
CRF asked (docs/import-format.md, "What a served video or audio clip keeps", quotes the figures).

Nothing is downloaded:

    python benchmarks/media_transparency.py --presets veryfast,faster,fast --crfs 14,16,18,20
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT, RATE = 640, 360, 30


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    import django

    django.setup()


def noise_scroll(frames: int) -> list[np.ndarray]:
    """Full-band noise (film grain at its worst) moving 3 px a frame to the left."""
    texture = np.random.default_rng(1).integers(0, 256, (HEIGHT, WIDTH + 3 * frames, 3))
    texture = texture.astype(np.uint8)
    return [texture[:, 3 * i : 3 * i + WIDTH] for i in range(frames)]


def small_text(frames: int) -> list[np.ndarray]:
    """Lines of 9- to 12-pixel text scrolling up 2 px a frame."""
    page = Image.new("RGB", (WIDTH, HEIGHT + 2 * frames), "white")
    draw = ImageDraw.Draw(page)
    y, size = 0, 9
    while y < page.height:
        font = ImageFont.load_default(size=size)
        draw.text((4, y), "The quick brown fox jumps over the lazy dog 0123456789 " * 2,
                  fill="black", font=font)  # fmt: skip
        y, size = y + size + 3, 9 + (size - 8) % 4
    pixels = np.asarray(page)
    return [pixels[2 * i : 2 * i + HEIGHT] for i in range(frames)]


def gradients(frames: int) -> list[np.ndarray]:
    """Slow horizontal and vertical ramps (banding shows first) drifting a pixel a frame."""
    x = np.linspace(0, 1, WIDTH + frames)[None, :]
    y = np.linspace(0, 1, HEIGHT)[:, None]
    out = []
    for i in range(frames):
        ramp = x[:, i : i + WIDTH]
        rgb = np.stack([ramp * 255 + 0 * y, y * 200 + 20 + 0 * ramp, (ramp + y) * 60 + 60], -1)
        out.append(rgb.astype(np.uint8))
    return out


def zone_plate(frames: int) -> list[np.ndarray]:
    """Concentric rings whose frequency rises to the edge, moving: aliasing and motion."""
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    out = []
    for i in range(frames):
        r2 = (xx - WIDTH / 2 - i * 2) ** 2 + (yy - HEIGHT / 2) ** 2
        value = 127.5 + 127.5 * np.cos(r2 * np.pi / 900)
        out.append(np.repeat(value[..., None], 3, -1).astype(np.uint8))
    return out


CLIPS = {
    "noise-scroll": noise_scroll,
    "small-text": small_text,
    "gradients": gradients,
    "zone-plate": zone_plate,
}


def write_lossless(path: Path, frames: list[np.ndarray]) -> None:
    """H.264 with quantiser 0 in yuv420p: the source's own luma, exactly."""
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=RATE, options={"qp": "0"})
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for pixels in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def luma_planes(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [
            frame.to_ndarray(format="gray").astype(np.float64)
            for frame in container.decode(video=0)
        ]


def _gaussian_window(size: int = 11, sigma: float = 1.5) -> np.ndarray:
    offsets = np.arange(size) - size // 2
    weights = np.exp(-(offsets**2) / (2 * sigma**2))
    return weights / weights.sum()


def _blur(image: np.ndarray, window: np.ndarray) -> np.ndarray:
    """A separable Gaussian filter, 'valid' region only (as Wang et al.'s ssim.m)."""
    rows = np.apply_along_axis(lambda r: np.convolve(r, window, mode="valid"), 1, image)
    return np.apply_along_axis(lambda c: np.convolve(c, window, mode="valid"), 0, rows)


def ssim(a: np.ndarray, b: np.ndarray, *, peak: float = 255.0) -> float:
    """Mean SSIM of two luma planes."""
    window = _gaussian_window()
    c1, c2 = (0.01 * peak) ** 2, (0.03 * peak) ** 2
    mu_a, mu_b = _blur(a, window), _blur(b, window)
    var_a = _blur(a * a, window) - mu_a**2
    var_b = _blur(b * b, window) - mu_b**2
    cov = _blur(a * b, window) - mu_a * mu_b
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    den = (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    return float((num / den).mean())


def psnr(a: np.ndarray, b: np.ndarray, *, peak: float = 255.0) -> float:
    """Peak signal-to-noise ratio of two luma planes, in dB (SSIM forgives noise on busy
    texture; this does not)."""
    mse = float(np.mean((a - b) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(peak**2 / mse)


def measure(source: Path, folder: Path, *, preset: str, crf: int, repeat: int) -> tuple:
    """The lowest and mean SSIM of a frame, the lowest PSNR, the served bytes and the CPU
    seconds a frame (the best of ``repeat`` runs; one thread, so a busy machine disturbs it
    less than wall time), through av_prepare."""
    from annotation.media import av_media, av_probe

    av_media.X264_OPTIONS = {"preset": preset, "crf": str(crf)}
    times = []
    for _ in range(repeat):
        started = time.process_time()
        prepared = av_media.av_prepare(
            source, kind="video", staging=folder, limits=av_probe.av_limits()
        )
        times.append(time.process_time() - started)
    seconds = min(times)
    if prepared.served is None:
        raise SystemExit(f"{source.name} refused: {prepared.error}")
    original, served = luma_planes(source), luma_planes(prepared.served)
    assert len(original) == len(served), (len(original), len(served))
    pairs = list(zip(original, served, strict=True))
    scores = [ssim(a, b) for a, b in pairs]
    worst_psnr = min(psnr(a, b) for a, b in pairs)
    size = prepared.served.stat().st_size
    prepared.served.unlink()
    return min(scores), float(np.mean(scores)), worst_psnr, size, seconds / len(original)


def main() -> None:
    global WIDTH, HEIGHT  # the clips' size, read by their makers
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="veryfast,faster,fast")
    parser.add_argument("--crfs", default="14,16,18,20")
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--height", type=int, default=HEIGHT, help="16:9 frames this high")
    parser.add_argument("--clips", default=",".join(CLIPS))
    parser.add_argument("--repeat", type=int, default=3, help="runs timed; the best is shown")
    args = parser.parse_args()
    HEIGHT, WIDTH = args.height, args.height * 16 // 9 // 2 * 2
    setup_django()
    print(f"{WIDTH}x{HEIGHT} at {RATE} fps, {args.frames} frames a clip, one thread")
    print(f"{'clip':<13} {'preset':<9} {'crf':>3} {'min SSIM':>9} {'mean SSIM':>9} "
          f"{'min PSNR':>8} {'kB':>7} {'ms/frame':>8}")  # fmt: skip
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for clip in args.clips.split(","):
            make = CLIPS[clip]
            source = folder / f"{clip}.mp4"
            write_lossless(source, make(args.frames))
            for preset in args.presets.split(","):
                for crf in (int(value) for value in args.crfs.split(",")):
                    low, mean, worst, size, per_frame = measure(
                        source, folder, preset=preset, crf=crf, repeat=args.repeat
                    )
                    row = f"{low:>9.4f} {mean:>9.4f} {worst:>8.1f} {size / 1000:>7.0f}"
                    print(f"{clip:<13} {preset:<9} {crf:>3} {row} {per_frame * 1000:>8.1f}")


if __name__ == "__main__":
    main()
