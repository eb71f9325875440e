"""The one 'did you mean' rule of every refusal of a name (models, GPUs, providers)."""

from __future__ import annotations

from gpuwise.errors import did_you_mean

DETECTION = ["alexnet", "swin_t", "swin_s", "fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn_v2",
             "fasterrcnn_mobilenet_v3_large_fpn", "fcos_resnet50_fpn"]


def test_names_the_typed_value_begins_come_first_shortest_first():
    # was: "fasterrcnn" suggested alexnet, swin_t, swin_s (difflib's ratio favours short names)
    assert did_you_mean("fasterrcnn", DETECTION, prefix="torchvision:") == (
        " (did you mean: torchvision:fasterrcnn_resnet50_fpn, torchvision:fasterrcnn_resnet50_fpn_v2, "
        "torchvision:fasterrcnn_mobilenet_v3_large_fpn?)")


def test_a_short_or_unmatched_value_keeps_difflibs_matches_and_none_is_said_twice():
    assert did_you_mean("fa", DETECTION) == ""                        # two letters begin too much to mean anything
    assert did_you_mean("swin_x", DETECTION) == " (did you mean: swin_t, swin_s?)"
    assert did_you_mean("ALEXNE", DETECTION, n=2) == " (did you mean: alexnet?)"   # begun and close: once
    assert did_you_mean("zzzzzz", DETECTION) == ""
