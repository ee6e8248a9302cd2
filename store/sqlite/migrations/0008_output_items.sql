-- 0008_output_items: the output items of streamed calls, kept so that a
-- later call may name one by id alone (the Responses API's item_reference).
-- A streamed item's id goes out before its content exists, so unlike a
-- whole reply's it cannot carry the item. The ledger writer inserts a
-- call's items in the transaction that inserts its generation; retention
-- deletes them with it. data is the surface's own encoding of the item
-- (surfaces/chat: a message's text, a reasoning item's summary and sealed
-- signature, a call's id, name and arguments). Lookups are by account and
-- id; retention's by generation.
CREATE TABLE output_items (
    account_id    INTEGER NOT NULL,
    id            TEXT    NOT NULL,
    generation_id TEXT    NOT NULL,
    data          BLOB    NOT NULL,
    PRIMARY KEY (account_id, id)
) STRICT, WITHOUT ROWID;

CREATE INDEX output_items_generation ON output_items (generation_id);
