

def test_clipped_keeps_what_fits_and_ends_what_does_not_with_an_ellipsis():
    from gpuwise.text import clipped

    assert clipped("abc", 3) == "abc"
    assert clipped("abcd efgh", 6) == "abcd…" and len(clipped("x" * 500, 200)) == 200
