"""The ``split`` reason's hint and the split-batch remedy name the same effective batch: ``splitting_batch``.

``plan.reasons.batch_does_not_split`` had its own copy of the next-multiple rule that ``plan.remedies`` used for
the remedy (``--effective-batch N``); both now read ``plan.batch_split.splitting_batch``. The two copies agreed,
so these tests guard the one rule rather than a changed answer."""

from __future__ import annotations

import re
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.plan import reasons
from gpuwise.plan.batch_remedy import split_batch_remedy, unsplit_options
from gpuwise.plan.batch_split import splitting_batch
from gpuwise.plan.quote import Quote

HINT = re.compile(r"--effective-batch (\d+) splits (\d+) per GPU")


def _hinted_batch(exclusion: reasons.Exclusion) -> tuple[int, int]:
    """(effective batch, per-GPU batch) the reason's words name."""
    found = HINT.search(exclusion.text)
    assert found is not None, exclusion.text
    return int(found[1]), int(found[2])


def _unsplit_option(effective: int, count: int, micro_batch: int) -> Quote:
    return Quote(gpu="h100", gpu_name="H100", count=count, provider="p", currency="USD", price_per_hour=2.0 * count,
                 spot=False, gpu_memory_bytes=80 << 30, fits=None, peak_total_bytes=None, spare_bytes=None,
                 step_time_s=None, batch_size=micro_batch, effective_batch_size=effective,
                 exclusion=reasons.batch_does_not_split(effective, count, micro_batch))


# no per-example deadline (Hypothesis' 200 ms default): a loaded machine's pause is no failure of the rule
@settings(deadline=None)
@given(effective=st.integers(1, 4096), count=st.integers(2, 64), micro_batch=st.integers(1, 16))
def test_the_split_reason_names_the_smallest_batch_at_or_above_the_job_s_that_the_count_splits(
        effective, count, micro_batch):
    batch, per_gpu = _hinted_batch(reasons.batch_does_not_split(effective, count, micro_batch))
    assert batch == splitting_batch(effective, count)
    assert batch >= effective and batch % count == 0 and batch - count < effective
    assert per_gpu * count == batch


@settings(deadline=None)
@given(effective=st.integers(1, 1024),
       counts=st.lists(st.integers(2, 16), min_size=1, max_size=4, unique=True), data=st.data())
def test_the_split_batch_remedy_runs_the_batch_its_option_s_reason_names(effective, counts, data):
    counts = [c for c in counts if effective % c] or [effective + 1]   # each count leaves its option out
    options = [_unsplit_option(effective, count, micro_batch=1) for count in counts]
    assert unsplit_options(options) == options
    fitting = data.draw(st.sampled_from(counts))

    def quote_at(_remedy, _workload, option: Quote, batch: int) -> Quote | None:
        return replace(option, fits=True, effective_batch_size=batch, exclusion=None) if option.count == fitting \
            else None

    change, quote = split_batch_remedy(options, [(None, None)], quote_at)
    (fitted,) = [o for o in options if o.count == fitting]
    batch, _per_gpu = _hinted_batch(fitted.exclusion)
    assert change == f"--effective-batch {batch}" and quote.effective_batch_size == batch
