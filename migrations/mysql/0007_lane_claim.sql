-- Regions (docs/deploy.md#12-regions-lanes): the identity of the database that recorded its lane
-- slot, written once beside the slot (a row recorded before this column is given one by the next
-- server that reads it). A server that reaches two databases recording one slot tells "one
-- database reached twice" (one claim id) from "two databases" (two) and refuses the later claim:
-- two databases serving one slot would hand out one id twice. The id starts with the claim's
-- time in ms (13 digits), so two claims order by it.
ALTER TABLE leafid_lane ADD COLUMN claim_id VARCHAR(64) NULL;
