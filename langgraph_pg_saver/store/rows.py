"""The column positions of the rows the store's statements return, named once.

Rows stay plain tuples (psycopg's default row factory: the fastest to build and to index); code
reads a column as ``row[ItemRow.VALUE_EXACT]``, never as a bare number. Each class is one row
shape: a statement's select list, in the order of the SQL (sql/queries.sql, and the import's
statements in ``rules.SourceTables``). ``WIDTH`` is the number of columns.
tests/unit/test_store_rows.py parses the SQL and checks every position here against the column's
alias or name, so a column moved or added in the middle of a select list fails there, not in a
read. (The same scheme as checkpoint/rows.py; the store does not import the checkpoint side.)

In a loop over many rows, bind the positions to locals first: a local is as fast as a literal.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- items


class ItemRow:
    """An item: store_get, store_search, store_unscored, and the import's items to embed again
    (``SourceTables.rows``); ``rules.row_to_item`` makes the Item."""

    PREFIX = 0
    KEY = 1
    VALUE = 2
    VALUE_EXACT = 3
    CREATED_AT = 4
    UPDATED_AT = 5
    TTL_MINUTES = 6
    WIDTH = 7


class NearRow:
    """store_vector_search: an item (the columns of ItemRow, in its places), its distance, then
    how many vectors the index scan gave and how many the prefix holds (the same on every row;
    one row of NULL item columns when no item is left)."""

    PREFIX = 0
    KEY = 1
    VALUE = 2
    VALUE_EXACT = 3
    CREATED_AT = 4
    UPDATED_AT = 5
    TTL_MINUTES = 6
    DISTANCE = 7
    GIVEN = 8
    HELD = 9
    WIDTH = 10


class NearestRow:
    """store_nearest: an item (the columns of ItemRow, in its places) and its distance (NULL: an
    item without vectors, after the scored ones)."""

    PREFIX = 0
    KEY = 1
    VALUE = 2
    VALUE_EXACT = 3
    CREATED_AT = 4
    UPDATED_AT = 5
    TTL_MINUTES = 6
    DISTANCE = 7
    WIDTH = 8


class ScoredRow:
    """A semantic search's row as the store hands it on (not a statement's): an item's columns
    (ItemRow's places), then its score (None: an item without vectors, after the scored ones)."""

    PREFIX = 0
    KEY = 1
    VALUE = 2
    VALUE_EXACT = 3
    CREATED_AT = 4
    UPDATED_AT = 5
    TTL_MINUTES = 6
    SCORE = 7
    WIDTH = 8


# --------------------------------------------------------------------------- the rest


class HashRow:
    """store_vector_hashes: a field already embedded, and the hash of the text it came from."""

    PREFIX = 0
    KEY = 1
    FIELD = 2
    TEXT_HASH = 3
    WIDTH = 4


class WriteRow:
    """store_write (and the write function, rules.write_ddl, whose rows are the statement's):
    whether it wrote, whether no item of the batch had changed meanwhile, then a field to embed
    (NULLs: none)."""

    OK = 0
    STILL = 1
    PREFIX = 2
    KEY = 3
    FIELD = 4
    WIDTH = 5


class PrefixRow:
    """store_prefixes: a namespace (dotted) holding an item."""

    PREFIX = 0
    WIDTH = 1


class SweepRow:
    """store_sweep: whether this session holds the sweep lock, how many items it deleted and
    found, and the last expires_at it found (where the next batch starts)."""

    HELD = 0
    DELETED = 1
    FOUND = 2
    LAST = 3
    WIDTH = 4


class SourceRow:
    """``SourceTables.exists``: whether the official store's tables are there."""

    HAS_STORE = 0
    HAS_VECTORS = 1
    WIDTH = 2


class ImportRow:
    """``SourceTables.items``: one batch of the import: items read, imported (new here), the last
    key read (where the next batch starts), vectors copied."""

    ITEMS = 0
    IMPORTED = 1
    LAST_PREFIX = 2
    LAST_KEY = 3
    VECTORS = 4
    WIDTH = 5
