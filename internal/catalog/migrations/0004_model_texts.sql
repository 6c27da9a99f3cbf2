-- 0004: the text of every model version a snapshot was built with. A model
-- written as one file ([transform] sql = "models/x.sql") is versioned by
-- its text's sha256, so editing the file in place is a new version; a
-- rerun of an older snapshot takes the text it ran with from here, since
-- the file no longer holds it. sha256 is the transform part's (the model
-- wrapped in the select pipeline's steps), model the model's SELECT.
CREATE TABLE IF NOT EXISTS idem.model_texts (
    job         VARCHAR NOT NULL,
    sha256      VARCHAR NOT NULL,
    model       VARCHAR NOT NULL,
    recorded_at TIMESTAMP
);
