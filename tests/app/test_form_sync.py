"""app.tabs.form_sync: only the newest stamped event of a page answers (issue 31 item 1)."""
from app.tabs.form_sync import Latest, parse


def test_an_older_stamp_arriving_after_a_newer_one_is_refused_and_a_running_one_is_superseded():
    latest = Latest()
    # six refreshes of one upload reach the server out of order: 1, 2, 4, 3 (the stale one), 5
    assert [latest.admit("refresh", f"mt-stamp:pageA:{n}") for n in (1, 2, 4, 3, 5)] == [True, True, True, False, True]
    assert not latest.current("refresh", "mt-stamp:pageA:4")  # 5 came while 4 computed: 4 answers nothing
    assert latest.current("refresh", "mt-stamp:pageA:5")
    # other pages and other kinds of event keep their own count
    assert latest.admit("refresh", "mt-stamp:pageB:1") and latest.admit("details", "mt-stamp:pageA:2")
    # the page-load event carries no stamp: always answered
    assert latest.admit("refresh", "mt-stamp") and parse("mt-stamp") is None and parse("mt-stamp:p:x") is None


def test_pages_are_forgotten_oldest_first():
    latest = Latest(max_pages=2)
    for page in ("a", "b", "c"):
        latest.admit("refresh", f"mt-stamp:{page}:9")
    assert latest.admit("refresh", "mt-stamp:a:1")  # "a" was forgotten: a fresh count
    assert not latest.admit("refresh", "mt-stamp:c:1")
