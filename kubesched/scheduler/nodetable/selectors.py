"""Label and node selectors evaluated over a whole batch of nodes at once.

Each requirement becomes one or two numpy comparisons on the key's code column, so a selector
with k requirements costs O(k) array operations whatever the number of nodes.
"""

from __future__ import annotations

import numpy as np

from kubesched.api.selectors import (
    DOES_NOT_EXIST,
    EQUALS,
    EXISTS,
    GT,
    IN,
    LT,
    NOT_EQUALS,
    NOT_IN,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
)
from kubesched.scheduler.nodetable.table import NodeBatch


def _codes_in(codes: np.ndarray, wanted: list[int]) -> np.ndarray:
    if not wanted:
        return np.zeros(len(codes), dtype=bool)
    found: np.ndarray = codes == wanted[0] if len(wanted) == 1 else np.isin(codes, wanted)
    return found


def requirement_mask(batch: NodeBatch, req: Requirement) -> np.ndarray:
    """Which nodes of ``batch`` have labels satisfying ``req``."""
    column = batch.table.label_column(req.key)
    size = len(batch)
    if column is None:
        absent_ok = req.op in (NOT_IN, NOT_EQUALS, DOES_NOT_EXIST)
        return np.full(size, absent_ok, dtype=bool)
    codes = batch.labels(req.key)
    op = req.op
    if op in (IN, EQUALS):
        return _codes_in(codes, [column.vocab[v] for v in req.values if v in column.vocab])
    if op in (NOT_IN, NOT_EQUALS):
        return ~_codes_in(codes, [column.vocab[v] for v in req.values if v in column.vocab])
    if op == EXISTS:
        return codes >= 0
    if op == DOES_NOT_EXIST:
        return codes < 0
    if op not in (GT, LT):
        raise ValueError(f"unknown operator {op}")
    integers, valid = column.integers()
    values, parsed = integers.take(codes), valid.take(codes)  # code -1 picks the trailing invalid slot
    matched: np.ndarray = parsed & (values > req.number if op == GT else values < req.number)
    return matched


def label_selector_mask(batch: NodeBatch, selector: LabelSelector) -> np.ndarray:
    if selector.nothing:
        return np.zeros(len(batch), dtype=bool)
    mask = np.ones(len(batch), dtype=bool)
    for req in selector.requirements:
        mask &= requirement_mask(batch, req)
    return mask


def node_selector_term_mask(batch: NodeBatch, term: NodeSelectorTerm) -> np.ndarray:
    if term.errors:
        return np.zeros(len(batch), dtype=bool)
    mask = np.ones(len(batch), dtype=bool)
    for req in term.labels:
        mask &= requirement_mask(batch, req)
    row_of = batch.table.row_of
    for req in term.fields:  # metadata.name In / NotIn, matched by row rather than by name
        hit = _codes_in(batch.row_ids(), [row_of[name] for name in req.values if name in row_of])
        mask &= hit if req.op == IN else ~hit
    return mask


def node_selector_mask(batch: NodeBatch, selector: NodeSelector) -> np.ndarray:
    mask = np.zeros(len(batch), dtype=bool)
    for term in selector.terms:
        mask |= node_selector_term_mask(batch, term)
    return mask
