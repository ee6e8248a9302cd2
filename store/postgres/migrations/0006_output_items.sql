-- 0005_output_items: the output items of streamed calls, kept so that a
-- later call may name one by id alone (the Responses API's item_reference);
-- see the SQLite migration 0008_output_items. The ledger writer inserts a
-- call's items in the batch that inserts its generation, so every instance
-- on the database finds them; retention deletes them with it.
CREATE TABLE output_items (
    account_id    BIGINT NOT NULL,
    id            TEXT   NOT NULL,
    generation_id TEXT   NOT NULL,
    data          BYTEA  NOT NULL,
    PRIMARY KEY (account_id, id)
);

CREATE INDEX output_items_generation ON output_items (generation_id);
