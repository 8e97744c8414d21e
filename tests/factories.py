"""factory_boy factories for volume; the named personas live in conftest.py."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from django.db.models import Max

from annotation.core.content import prompt_id, response_id, text_part
from annotation.core.search import search_words, text_parts
from annotation.models import (
    Membership,
    Pair,
    PairStatus,
    Project,
    Prompt,
    Release,
    Response,
    Role,
    Side,
    Vote,
)
from judges.models import FilterRun, Judge


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("correct horse battery staple")


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Project {n}")
    slug = factory.Sequence(lambda n: f"project-{n}")
    scale = "ternary"
    overlap = 3
    min_agree = 2


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    project = factory.SubFactory(ProjectFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.ANNOTATOR


def make_prompt(project: Project, text: str, content: list[dict] | None = None) -> Prompt:
    content = content or [text_part(text)]
    prompt, _ = Prompt.objects.get_or_create(
        id=prompt_id(project.pk, content), defaults={"project": project, "content": content}
    )
    return prompt


def make_response(
    project: Project, model_name: str, text: str, content: list[dict] | None = None
) -> Response:
    content = content or [text_part(text)]
    response, _ = Response.objects.get_or_create(
        id=response_id(project.pk, model_name, content),
        defaults={"project": project, "model_name": model_name, "content": content},
    )
    return response


class PairFactory(factory.django.DjangoModelFactory):
    """A text pair; pass ``status=PairStatus.QUEUED`` for one annotators can claim."""

    class Meta:
        model = Pair

    project = factory.SubFactory(ProjectFactory)
    external_id = factory.Sequence(lambda n: f"pair-{n}")
    prompt = factory.LazyAttribute(lambda o: make_prompt(o.project, f"Prompt for {o.external_id}"))
    response_a = factory.LazyAttribute(
        lambda o: make_response(o.project, "model-alpha", f"Answer one to {o.external_id}")
    )
    response_b = factory.LazyAttribute(
        lambda o: make_response(o.project, "model-beta", f"Answer two to {o.external_id}")
    )
    task = "text"
    status = PairStatus.IMPORTED
    target_votes = factory.LazyAttribute(lambda o: o.project.overlap)
    # What the importer writes, so that the pairs browser's search finds factory pairs too.
    search_words = factory.LazyAttribute(
        lambda o: search_words(
            external_id=o.external_id,
            texts=text_parts(o.prompt.content),
            model_names=(o.response_a.model_name, o.response_b.model_name),
        )
    )


# The canonical value of a vote on the binary and ternary scales (annotation.models.Vote).
TERNARY_VALUE = {Side.A: 3, Side.TIE: 2, Side.B: 1}


class VoteFactory(factory.django.DjangoModelFactory):
    """A vote on the ternary scale, shown with A on the left; ``side`` sets its value."""

    class Meta:
        model = Vote

    pair = factory.SubFactory(PairFactory)
    annotator = factory.SubFactory(UserFactory)
    side = Side.A
    value = factory.LazyAttribute(lambda o: TERNARY_VALUE[o.side])
    left_is_a = True


class JudgeFactory(factory.django.DjangoModelFactory):
    """A judge that needs no server (the heuristic kind unless told otherwise)."""

    class Meta:
        model = Judge

    name = factory.Sequence(lambda n: f"judge-{n}")
    kind = Judge.Kind.HEURISTIC


class FilterRunFactory(factory.django.DjangoModelFactory):
    """A filter run numbered after the project's last; ``judges=[...]`` sets its judges."""

    class Meta:
        model = FilterRun
        skip_postgeneration_save = True  # setting the judges saves nothing on the run

    project = factory.SubFactory(ProjectFactory)
    number = factory.LazyAttribute(
        lambda o: (o.project.filter_runs.aggregate(last=Max("number"))["last"] or 0) + 1
    )

    @factory.post_generation
    def judges(self, create, extracted, **kwargs):
        if create and extracted:
            self.judges.set(extracted)


class ReleaseFactory(factory.django.DjangoModelFactory):
    """A draft release of every decided pair (the empty selection)."""

    class Meta:
        model = Release

    project = factory.SubFactory(ProjectFactory)
    version = factory.Sequence(lambda n: f"0.{n}.0")
    selection = factory.LazyFunction(dict)
