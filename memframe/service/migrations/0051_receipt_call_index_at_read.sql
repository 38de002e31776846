-- A receipt's call index (its place among its admission's recalls) is numbered when the receipts
-- are read, not counted at every insert: recall queues its receipt to commit in a later batch,
-- and counting at insert cost a scan of the conversation's receipts per recall.
ALTER TABLE memory_recall_receipts DROP COLUMN call_index;
