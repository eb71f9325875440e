"""The Plateau box's share reads the right way round: the drop per doubling is a share of what the run has gained,
so each doubling lowers the loss by that share of the gain (the review found "takes 0.7% off what the run has
gained so far", which says the gain shrinks). --json's ``drop_per_doubling_is`` is the rule's own words, not a
split of the sentence that holds them."""

from gpuwise.advise.wording import FLAT_SHARE_OF, flat_drop_text, flat_rule_text


def test_the_share_of_the_gain_reads_as_a_drop_of_the_loss():
    text = flat_drop_text(0.007, 0.034)
    assert text.startswith("each doubling of the steps lowers the loss by 0.7% of what the run has gained so far")
    assert "off what the run has gained" not in text


def test_the_json_words_are_the_rules_own():
    assert flat_rule_text(0.01) == f"under 1% per doubling of the steps, {FLAT_SHARE_OF}"
