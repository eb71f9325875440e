"""``plan_launch(option, gpu, command)`` takes the option's catalog GPU: a name (``"a100"``) raised an
AttributeError deep inside; it is a LaunchError in one line, as is a GPU other than the option's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuwise.launch import LaunchError, plan_launch

COMMAND = "python train.py"


def _option(gpu: str | None = "rtx-4090"):
    option = SimpleNamespace(count=1, provider="autodl", spot=False)
    if gpu is not None:           # a recommendation's option (plan.Quote) names its GPU by id
        option.gpu = gpu
    return option


def test_a_gpu_name_is_refused_naming_the_options_gpu():
    with pytest.raises(LaunchError, match=r"^gpu must be the option's catalog GPU, not 'a100': "
                                          r"catalog\.gpu\('rtx-4090'\) gives it$"):
        plan_launch(_option(), "a100", COMMAND)


def test_a_gpu_name_for_an_option_without_one_says_how_to_get_a_gpu():
    with pytest.raises(LaunchError, match=r"gpu must be a catalog GPU, not 'a100': gpuwise\.catalog\.resolve_gpu"):
        plan_launch(_option(None), "a100", COMMAND)


def test_another_gpu_than_the_options_is_refused(cat):
    with pytest.raises(LaunchError, match=r"gpu h100-sxm is not the option's GPU: it is priced on rtx-4090"):
        plan_launch(_option(), cat.gpu("h100-sxm"), COMMAND)


def test_the_options_own_gpu_launches(cat):
    plan = plan_launch(_option(), cat.gpu("rtx-4090"), COMMAND)
    assert plan.gpu.id == "rtx-4090" and plan.count == 1
