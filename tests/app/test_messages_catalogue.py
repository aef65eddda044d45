"""core.spec.catalogue and app.texts: one catalogue, by domain, each id with its English and its 中文
side by side and the kinds of its parameters declared with it. A missing language, a 中文 with other
parameters than the English, a kind that names no parameter of the template or that nobody knows how
to say, an id in two domains: each fails here, not in a user's page."""
from __future__ import annotations

import string
from pathlib import Path

import pytest

from core.spec.catalogue import CATALOGUE, DOMAINS, ENTRIES, KINDS, MESSAGES_ZH, Entry, merged

ROOT = Path(__file__).resolve().parents[2]


def fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def problems(entries: dict[str, Entry]) -> list[str]:
    """What is wrong with a catalogue's entries, one line each."""
    found = []
    for key, entry in entries.items():
        if not isinstance(entry, Entry):
            found.append(f"{key}: not an Entry")
            continue
        if not entry.en.strip() or not entry.zh.strip():
            found.append(f"{key}: {'English' if not entry.en.strip() else '中文'} missing")
        if set(fields(entry.en)) != set(fields(entry.zh)):
            found.append(f"{key}: 中文 {sorted(set(fields(entry.zh)))} against English {sorted(set(fields(entry.en)))}")
        for name, kind in entry.kinds.items():
            if name not in fields(entry.en):
                found.append(f"{key}: kind of {name}, which the template lacks")
            if kind not in KINDS:
                found.append(f"{key}: {name} of unknown kind {kind}")
    return found


def test_every_core_message_has_both_languages_the_same_parameters_and_known_kinds():
    assert problems(ENTRIES) == []
    assert len(ENTRIES) > 600 and set(DOMAINS) >= {"run", "cluster", "data", "model", "config", "train", "export"}
    assert CATALOGUE == {key: entry.en for key, entry in ENTRIES.items()}
    assert MESSAGES_ZH == {key: entry.zh for key, entry in ENTRIES.items()}


def test_every_console_text_has_both_languages_the_same_parameters_and_known_kinds():
    from app.i18n import TEXTS

    assert problems(TEXTS) == []
    assert len(TEXTS) > 700


@pytest.mark.parametrize("entry, problem", [
    (Entry("stopped by the user", ""), "x.id: 中文 missing"),
    (Entry("", "用户停止"), "x.id: English missing"),
    (Entry("reached {steps} steps", "已达到 {step} 步"), "x.id: 中文 ['step'] against English ['steps']"),
    (Entry("{reason}", "{reason}", {"why": "message"}), "x.id: kind of why, which the template lacks"),
    (Entry("{reason}", "{reason}", {"reason": "prose"}), "x.id: reason of unknown kind prose"),
    (("reached {steps} steps", "已达到 {steps} 步"), "x.id: not an Entry"),
])
def test_a_missing_language_another_parameter_or_a_wrong_kind_is_found(entry, problem):
    assert problems({"x.id": entry}) == [problem]


def test_an_id_in_two_domains_is_refused():
    with pytest.raises(ValueError, match=r"model: run\.a already in another domain"):
        merged({"run": {"run.a": Entry("a", "甲")}, "model": {"run.a": Entry("b", "乙")}})


def test_every_kind_is_said_in_chinese():
    """A kind is said by app.i18n.KIND_ZH, except those said by the message machinery itself (a
    message, a list, lines); a kind nobody declares is dead."""
    from app.i18n import KIND_ZH, TEXTS

    assert set(KIND_ZH) == set(KINDS) - {"message", "list", "lines"}
    declared = {kind for entries in (ENTRIES, TEXTS) for entry in entries.values() for kind in entry.kinds.values()}
    assert declared == set(KINDS)


def test_a_kind_not_a_name_chooses_how_a_parameter_is_said():
    """The same parameter name, said by the kind its message declares: `{choices}` of kind `names` is
    quoted name by name; a template's parameter without a kind is said as given."""
    from app.i18n import problem_text
    from core.spec.messages import Message

    names = next(key for key, entry in ENTRIES.items() if entry.kinds.get("choices") == "names")
    assert "'a', 'b'" in problem_text(Message(names, **{n: "a, b" if n == "choices" else "x"
                                                        for n in fields(CATALOGUE[names])}), "zh")
    plain = next(key for key, entry in ENTRIES.items() if "file" in fields(entry.en) and "file" not in entry.kinds)
    assert "a, b" in problem_text(Message(plain, **{n: "a, b" if n == "file" else "x"
                                                    for n in fields(CATALOGUE[plain])}), "zh")


def test_the_catalogue_names_no_work_plan():
    """Domains, not work-plan areas: no comment in the catalogue or the console's texts names an area
    or an issue of the work plan."""
    import re

    plan = re.compile(r"\barea [A-F]\b|\bissue \d+", re.I)
    files = sorted((ROOT / "core/spec/catalogue").glob("*.py")) + sorted((ROOT / "app/texts").glob("*.py")) + [
        ROOT / "app/i18n.py", ROOT / "core/spec/messages.py"]
    assert [f"{path.name}:{n}" for path in files
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if "#" in line and plan.search(line.split("#", 1)[1])] == []
