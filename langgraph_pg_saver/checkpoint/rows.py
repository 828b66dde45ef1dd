"""The column positions of the rows our statements return, named once.

Rows stay plain tuples (psycopg's default row factory: the fastest to build and to index); code
reads a column as ``row[ReadHead.METADATA]``, never as a bare number. Each class is one row shape:
a statement's select list or one kind of row of a UNION ALL, in the order of the SQL
(sql/queries.sql, and migration 0007's ``pgsaver_get_tuple``, which returns get_tuple's rows).
``WIDTH`` is the number of columns. tests/unit/test_rows.py parses the SQL and checks every
position here against the column's alias or name, so a column moved or added in the middle of a
select list fails there, not in a read.

In a loop over many rows, bind the positions to locals first: a local is as fast as a literal.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- get_tuple
# get_tuple, get_tuple_id (queries.sql _tuple_rows) and get_tuple_call (migration 0007): the
# checkpoint's own row first in SQL, then its values, then its writes; ordered by kind.


class TupleValue:
    """Kind 0: a channel's value at the checkpoint's version."""

    KIND = 0
    CHANNEL = 1
    VERSION = 2
    TYPE = 3
    BLOB = 4
    WIDTH = 12


class TupleWrite:
    """Kind 1: a pending write, in writes_sort_key order."""

    KIND = 0
    TASK_ID = 1
    CHANNEL = 2
    TYPE = 3
    BLOB = 4
    TASK_PATH = 5
    IDX = 6
    WIDTH = 12


class TupleHead:
    """Kind 2: the checkpoint (the last row)."""

    KIND = 0
    CHECKPOINT_ID = 1
    PARENT_CHECKPOINT_ID = 2
    TYPE = 3
    BODY = 4
    CHANNEL_VERSIONS = 7
    METADATA = 8
    METADATA_EXACT = 9
    THREAD_ID = 10
    CHECKPOINT_NS = 11
    WIDTH = 12


# --------------------------------------------------------------------------- list
# read_tuples and its variants (queries.sql _read_body): values, then writes, then checkpoints.


class ReadValue:
    """Kind 0: a value, once however many of the chosen checkpoints share it."""

    KIND = 0
    THREAD_ID = 1
    CHECKPOINT_NS = 2
    CHANNEL = 3
    VERSION = 4
    TYPE = 5
    BLOB = 6
    WIDTH = 13


class ReadWrite:
    """Kind 1: a pending write of a chosen checkpoint."""

    KIND = 0
    THREAD_ID = 1
    CHECKPOINT_NS = 2
    CHECKPOINT_ID = 3
    TASK_ID = 4
    TYPE = 5
    BLOB = 6
    CHANNEL = 7
    TASK_PATH = 8
    IDX = 9
    WIDTH = 13


class ReadHead:
    """Kind 2: a chosen checkpoint, newest first."""

    KIND = 0
    THREAD_ID = 1
    CHECKPOINT_NS = 2
    CHECKPOINT_ID = 3
    PARENT_CHECKPOINT_ID = 4
    TYPE = 5
    CHECKPOINT = 6
    CHANNEL_VERSIONS = 10
    METADATA = 11
    METADATA_EXACT = 12
    WIDTH = 13


class KeyRow:
    """list_keys and its variants (_recent, list_keys_capped, list_keys_global): a candidate of a
    metadata filter, checked by its metadata before it is read."""

    THREAD_ID = 0
    CHECKPOINT_NS = 1
    CHECKPOINT_ID = 2
    METADATA = 3
    METADATA_EXACT = 4
    WIDTH = 5


class SendRow:
    """pending_sends: a __pregel_tasks write of the parent of a checkpoint of format < 4."""

    THREAD_ID = 0
    CHECKPOINT_NS = 1
    CHECKPOINT_ID = 2
    TYPE = 3
    BLOB = 4
    TASK_ID = 5
    IDX = 6
    TASK_PATH = 7
    WIDTH = 8


# --------------------------------------------------------------------------- lifecycle


class ResealRow:
    """copied_sealed_rows and reencrypt_blobs / _writes / _checkpoints (_reseal_*_columns): a
    stored value to seal again. A and B are the rest of its key after thread and namespace: a
    blob's channel and version, a write's checkpoint id and task id, a checkpoint's id (A)."""

    KIND = 0
    THREAD_ID = 1
    CHECKPOINT_NS = 2
    A = 3
    B = 4
    CHANNEL = 5
    IDX = 6
    TYPE = 7
    BLOB = 8
    TASK_PATH = 9
    PARENT = 10
    CHANNEL_VERSIONS = 11
    METADATA = 12
    METADATA_EXACT = 13
    WIDTH = 14


class RunsRow:
    """delete_for_runs and delete_for_runs_plan (_runs_result). Kind 0 is the summary: from
    CHECKPOINTS on, the counts of checkpoints, writes, blobs, threads, bytes, and the run ids that
    matched nothing; kind 1 a surviving checkpoint and (A) the one it needs; kind 2 an entangled
    row: its checkpoint, (A) task, channel, run id, and the run ids its write replaced."""

    KIND = 0
    THREAD_ID = 1
    CHECKPOINT_NS = 2
    CHECKPOINT_ID = 3
    A = 4
    CHANNEL = 5
    RUN_ID = 6
    REPLACED = 7
    CHECKPOINTS = 8
    WRITES = 9
    BLOBS = 10
    WIDTH = 14
