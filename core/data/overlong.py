"""Records longer than `data.max_seq_len`: `data.overlong` truncate | skip | error, and text chunks.

    truncate  (the default) multi-turn conversations first lose whole turns from the end (while more
              than one trained answer remains); what is still too long is cut by LLaMA-Factory's
              proportional rule (`cutoff_lengths`, its `infer_seqlen`): the answer keeps up to
              max_seq_len when it is under half of it, else the prompt keeps its length when under
              half, else both keep a share proportional to their lengths; each keeps its beginning.
              So every record trains the start of its answer.
    skip      the record is left out.
    error     every over-long record is listed (the first LISTED and a count), and nothing trains.
Truncated and skipped records are counted and listed (file, record, length) in the statistics.
Raw text is never cut: a document longer than max_seq_len becomes consecutive max_seq_len chunks.

Pieces are a sample's (token ids, is_answer) runs in order, as core.data.pipeline renders them. Pure Python.
"""
from __future__ import annotations

from core.data.files import DataError
from core.spec.messages import Message
from core.spec.stats import listing

OVERLONG = ("truncate", "skip", "error")

Pieces = list[tuple[list[int], bool]]


def cutoff_lengths(source_len: int, target_len: int, cutoff_len: int) -> tuple[int, int]:
    """(prompt tokens kept, answer tokens kept) for a prompt and answer over `cutoff_len`:
    LLaMA-Factory's `infer_seqlen` (src/llamafactory/data/processor/processor_utils.py)."""
    if target_len * 2 < cutoff_len:  # a short answer is kept whole
        max_target_len = cutoff_len
    elif source_len * 2 < cutoff_len:  # a short prompt is kept whole
        max_target_len = cutoff_len - source_len
    else:  # both long: shares in proportion to their lengths
        max_target_len = int(cutoff_len * (target_len / (source_len + target_len)))
    new_target_len = min(max_target_len, target_len)
    new_source_len = min(max(cutoff_len - new_target_len, 0), source_len)
    return new_source_len, new_target_len


def _length(pieces: Pieces) -> int:
    return sum(len(ids) for ids, _ in pieces)


def truncate_pieces(pieces: Pieces, max_len: int) -> Pieces:
    """`pieces` cut to `max_len` tokens (see the module's rule). The unlabelled text after the last
    kept answer (a template's closing newline) is kept only where it fits."""
    answers = [i for i, (_, is_answer) in enumerate(pieces) if is_answer]
    while _length(pieces) > max_len and len(answers) > 1:  # drop the last turn (its prompt and answer)
        answers.pop()
        pieces = pieces[:answers[-1] + 1]
    if _length(pieces) <= max_len:
        return pieces
    last = answers[-1] if answers else len(pieces)
    source = [t for ids, _ in pieces[:last] for t in ids]
    target = list(pieces[last][0]) if answers else []
    if len(source) + len(target) <= max_len:  # the tail after the answer alone is over
        tail = [t for ids, _ in pieces[last + 1:] for t in ids]
        return [(source, False), (target, True), (tail[:max_len - len(source) - len(target)], False)]
    keep_source, keep_target = cutoff_lengths(len(source), len(target), max_len)
    return [(source[:keep_source], False), (target[:keep_target], True)]


def text_chunks(ids: list[int], max_len: int) -> list[list[int]]:
    """A document's ids as consecutive chunks of `max_len` tokens; a last chunk of one token is
    dropped (position 0 of a row is never a target, so it would train nothing)."""
    chunks = [ids[k:k + max_len] for k in range(0, len(ids), max_len)]
    return [c for c in chunks if len(c) > 1] or chunks[:1]


def overlong_error(records: list[tuple[str, int]], max_len: int) -> DataError:
    """Every record over `max_len` under data.overlong: error."""
    return DataError(Message("data.overlong_many" if len(records) != 1 else "data.overlong_one", count=len(records),
                             max_seq_len=max_len, listed=listing(records, len(records))))


def check_policy(policy: str) -> None:
    if policy not in OVERLONG:
        raise DataError(Message("data.not_valid", setting="data.overlong", value=repr(policy),
                                valid_names=", ".join(OVERLONG)))
