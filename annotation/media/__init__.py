"""Media: the bytes behind ``Media`` rows, checked, stripped, rendered and served.

``views`` serves a project's members the served copy (with range requests). ``services``
checks images and stores their served copy, a PNG that ``image_rebuild`` writes anew from the
decoded pixels, and the 3D models' copies without metadata (``glb``); ``copies`` says, from
a row alone, whether a copy must be made (again);
``av_media`` probes video and audio with PyAV and re-encodes them, in one served format and
without metadata (``loudness`` measures a clip, ``av_samples`` gathers its waveform),
``media_pool`` does that in bounded children;
``glb_render``
renders a 3D model's views. ``judge_images`` and ``judge_parts`` read stored media as a judge
is sent them, and ``demo`` makes the demo's video, audio and 3D files. The one package that
imports PyAV or Pillow (``pyproject.toml``'s import contracts).
Imports core and models only; ``annotation.imports`` reads import files and calls this package.
"""
