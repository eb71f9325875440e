"""An effective batch of one reads "1 sample", not "1 samples" (a newcomer's trial: recommend of a 14B full
fine-tune at --batch-size 1 said "note: effective batch 1 samples per step")."""

from gpuwise.plan.batch_remedy import grown_batch_note
from gpuwise.units import format_count


def test_a_count_of_one_takes_the_singular():
    assert [format_count(n, "sample") for n in (1, 2, 1024)] == ["1 sample", "2 samples", "1,024 samples"]


def test_a_batch_note_that_shrinks_the_batch_to_one_reads_singular():
    assert grown_batch_note(2, 1, 1) == "effective batch 1 sample per optimizer step instead of 2"
