-- A receipt's call index (its place among its admission's recalls) is numbered when the receipts
-- are read, not counted at every insert: recall queues its receipt to commit in a later batch,
-- and counting at insert cost a scan of the conversation's receipts per recall.
ALTER TABLE memory_recall_receipts DROP COLUMN call_index;

-- The admission row records its latest recall's status and revision: kept by the database from
-- the receipt itself, so one queued insert is the whole record of a recall.
-- only sqlite
CREATE TRIGGER memory_recall_receipts_mark_admission AFTER INSERT ON memory_recall_receipts BEGIN UPDATE workspace_memory_admissions SET recall_status = NEW.status, recall_revision = NEW.revision WHERE id = NEW.admission_id; END;

-- PostgreSQL's trigger runs a function.
-- only postgresql
CREATE FUNCTION memory_recall_receipts_mark_admission() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE workspace_memory_admissions SET recall_status = NEW.status, recall_revision = NEW.revision WHERE id = NEW.admission_id; RETURN NULL; END $$;

-- only postgresql
CREATE TRIGGER memory_recall_receipts_mark_admission AFTER INSERT ON memory_recall_receipts FOR EACH ROW EXECUTE FUNCTION memory_recall_receipts_mark_admission();
