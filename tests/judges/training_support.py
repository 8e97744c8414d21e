"""Generated preference pairs with a learnable signal, for the trainer's tests and
benchmarks/train_speed.py: the chosen response answers the prompt helpfully, the rejected one
is evasive or off-topic (worded many ways), and a small share of labels is flipped as noise."""

from __future__ import annotations

import random

from judges.reward_model.data import PreferencePair
from judges.reward_model.model import ScoringInput

TOPICS = (
    "photosynthesis",
    "the water cycle",
    "binary search",
    "compound interest",
    "volcanoes",
    "the French revolution",
    "vaccines",
    "black holes",
    "recursion",
    "supply and demand",
    "plate tectonics",
    "the immune system",
    "neural networks",
    "the Roman empire",
    "tides",
    "electric circuits",
    "climate change",
    "DNA replication",
    "hash tables",
    "the moon landing",
)
CRITERIA = ("", "Prefer the more accurate answer.", "Judge only helpfulness.", "")
GOOD = (
    "{topic} works like this: first, the main idea is explained step by step, then a concrete "
    "example shows how it applies, and finally the key facts are summarised clearly.",
    "Here is a clear and accurate explanation of {topic}, with an example and the reasons "
    "behind each step, so you can understand and apply it yourself.",
    "In short, {topic} can be understood through three points, each explained with a simple "
    "example; together they answer your question completely and correctly.",
    "Great question about {topic}. The explanation below covers the definition, how it works "
    "in practice, a worked example, and common mistakes to avoid.",
)
BAD = (
    "I am not sure, maybe look it up somewhere else. I cannot really help with that.",
    "Whatever, {topic} is boring and I will not explain it. Ask someone else.",
    "Bananas are yellow and the weather is nice today. Unrelated words follow here.",
    "Sorry, I do not know anything about this and cannot answer your question at all.",
)


def preference_pairs(
    n: int, *, seed: int = 0, noise: float = 0.05, per_prompt: int = 2
) -> list[PreferencePair]:
    """``n`` pairs, ``per_prompt`` on each prompt; ``noise`` of them with the label flipped."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        group = i // per_prompt
        topic = TOPICS[group % len(TOPICS)]
        prompt = f"Question {group}: please explain {topic} to a student."
        criterion = CRITERIA[group % len(CRITERIA)]
        good = rng.choice(GOOD).format(topic=topic) + f" (variant {rng.randrange(1000)})"
        bad = rng.choice(BAD).format(topic=topic) + f" (variant {rng.randrange(1000)})"
        if rng.random() < noise:
            good, bad = bad, good
        pairs.append(
            PreferencePair(
                key=f"generated-{i}",
                group=f"prompt-{group}",
                chosen=ScoringInput(prompt, good, criterion=criterion),
                rejected=ScoringInput(prompt, bad, criterion=criterion),
            )
        )
    return pairs


def consensus_pairs_in(project, pairs: list[PreferencePair], *, seed: int = 0) -> list:
    """Stores ``pairs`` in ``project`` as consensus pairs, the chosen response on a random
    side (A or B), and returns the ``Pair`` rows."""
    from annotation.models import Pair, PairStatus
    from tests.factories import make_prompt, make_response

    rng = random.Random(seed)
    rows = []
    for pair in pairs:
        chosen_is_a = rng.random() < 0.5
        first, second = (
            (pair.chosen, pair.rejected) if chosen_is_a else (pair.rejected, pair.chosen)
        )
        rows.append(
            Pair(
                project=project,
                external_id=pair.key,
                prompt=make_prompt(project, pair.chosen.prompt_text),
                response_a=make_response(project, "model-a", first.response_text),
                response_b=make_response(project, "model-b", second.response_text),
                criterion=pair.chosen.criterion,
                status=PairStatus.CONSENSUS,
                consensus_label="A" if chosen_is_a else "B",
                target_votes=project.overlap,
            )
        )
    return Pair.objects.bulk_create(rows)


def criterion_pairs(n: int, *, seed: int = 0) -> list[PreferencePair]:
    """Pairs whose label only the criterion decides: the same kind of short and long answers,
    the short one chosen under "Prefer the shorter answer.", the long one under "Prefer the
    longer, more detailed answer."."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        prompt = f"Question {i}: tell me about {topic}."
        short = f"{topic.capitalize()}: yes. (note {rng.randrange(1000)})"
        long = rng.choice(GOOD).format(topic=topic) + f" (note {rng.randrange(1000)})"
        if i % 2:
            criterion, chosen, rejected = "Prefer the shorter answer.", short, long
        else:
            criterion, chosen, rejected = "Prefer the longer, more detailed answer.", long, short
        pairs.append(
            PreferencePair(
                key=f"criterion-{i}",
                group=f"prompt-{i}",
                chosen=ScoringInput(prompt, chosen, criterion=criterion),
                rejected=ScoringInput(prompt, rejected, criterion=criterion),
            )
        )
    return pairs
