from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project
from judges.models import Judge
from judges.prompts import ANSWER_FORMATS, PRESETS
from judges.roster.services import KIND_FIELDS, judge_create

# Command-line flag -> Judge field; a flag applies to the kinds that read its field.
_FLAGS = {
    "base_url": "base_url",
    "model": "model",
    "api_key_env": "api_key_env",
    "concurrency": "concurrency",
    "temperature": "temperature",
    "max_tokens": "max_tokens",
    "timeout": "timeout_s",
    "rpm": "requests_per_minute",
    "max_image_side": "max_image_side",
    "video_frames": "video_frames",
    "video_frame_side": "video_frame_side",
    "takes_audio": "takes_audio",
    "checkpoint": "checkpoint",
    "device": "device",
    "batch_size": "batch_size",
}


class Command(BaseCommand):
    help = (
        "Add a judge (operators only). openai needs --base-url and --model (the API key is "
        "read at call time from the environment variable named by --api-key-env, which must "
        "match ARBITER_JUDGE_KEY_ENV_PATTERN; it is never stored); reward_model needs "
        "--checkpoint under ARBITER_CHECKPOINT_ROOT; heuristic and scores need nothing. "
        "--project limits the judge to the projects named."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="unique judge name (a slug)")
        parser.add_argument("--kind", choices=Judge.Kind.values, required=True)
        parser.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. http://host/v1")
        parser.add_argument("--model", help="model name sent to the endpoint")
        parser.add_argument(
            "--api-key-env", help="NAME of the environment variable holding the API key"
        )
        parser.add_argument("--concurrency", type=int, help="requests in flight (default 16)")
        parser.add_argument("--temperature", type=float, help="sampling temperature (default 0)")
        parser.add_argument("--max-tokens", type=int, help="answer token limit (default 1024)")
        parser.add_argument("--timeout", type=float, help="seconds per request (default 60)")
        parser.add_argument("--rpm", type=int, help="requests per minute, 0 = no limit")
        parser.add_argument("--max-image-side", type=int, help="downscale images to this side")
        parser.add_argument(
            "--video-frames", type=int, help="frames sampled uniformly from a video (default 8)"
        )
        parser.add_argument(
            "--video-frame-side", type=int, help="longest side of a video frame sent (default 512)"
        )
        parser.add_argument(
            "--takes-audio",
            action="store_const",
            const=True,
            help="the model accepts input_audio parts (default: pairs with audio are refused)",
        )
        parser.add_argument(
            "--checkpoint", help="reward-model checkpoint, under ARBITER_CHECKPOINT_ROOT"
        )
        parser.add_argument("--device", help="cpu, cuda or cuda:N (default cpu)")
        parser.add_argument("--batch-size", type=int, help="responses per forward pass")
        parser.add_argument(
            "--prompt", choices=list(PRESETS), help="prompt preset (default arbiter; openai)"
        )
        parser.add_argument(
            "--prompt-template-file",
            metavar="FILE",
            help="the prompt's own text with placeholders such as {prompt}, {response_1}, "
            "{response_2}, {criterion}, {scale}, {answer_format} (openai; docs/judges.md)",
        )
        parser.add_argument(
            "--answer-format", choices=ANSWER_FORMATS, help="default: the preset's (openai)"
        )
        parser.add_argument("--disabled", action="store_true", help="create it disabled")
        parser.add_argument(
            "--project",
            action="append",
            default=[],
            metavar="SLUG",
            help="a project that may run the judge (repeat for several; none: every project)",
        )

    def handle(self, *args, **options):
        kind = options["kind"]
        fields = {}
        for flag, field in _FLAGS.items():
            value = options[flag]
            if value is None:
                continue
            if field not in KIND_FIELDS[kind]:
                option = "--" + flag.replace("_", "-")
                raise CommandError(f"{option} does not apply to --kind {kind}")
            fields[field] = value
        prompt_options = self._prompt_options(options)
        if prompt_options:
            if kind != Judge.Kind.OPENAI:
                raise CommandError(f"prompt options do not apply to --kind {kind}")
            fields["options"] = prompt_options
        slugs = list(dict.fromkeys(options["project"]))
        projects = list(Project.objects.filter(slug__in=slugs))
        if unknown := sorted(set(slugs) - {project.slug for project in projects}):
            raise CommandError(f"--project: no project with slug {', '.join(unknown)}")
        try:
            judge = judge_create(
                name=options["name"],
                kind=kind,
                enabled=not options["disabled"],
                projects=projects,
                **fields,
            )
        except ValidationError as exc:
            lines = [
                f"  {field}: {message}"
                for field, messages in exc.message_dict.items()
                for message in messages
            ]
            raise CommandError("Judge not created:\n" + "\n".join(lines)) from None
        available = ", ".join(slugs) or "every project"
        self.stdout.write(
            self.style.SUCCESS(
                f"Created {judge.kind} judge {judge.name} (queue {judge.queue}), "
                f"available to {available}"
            )
        )

    def _prompt_options(self, options) -> dict:
        """The judge's prompt options from --prompt, --prompt-template-file, --answer-format."""
        found = {}
        if options["prompt"]:
            found["prompt"] = options["prompt"]
        if options["answer_format"]:
            found["answer_format"] = options["answer_format"]
        if path := options["prompt_template_file"]:
            try:
                found["prompt_template"] = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"--prompt-template-file: cannot read {path}: {exc}") from None
        return found
