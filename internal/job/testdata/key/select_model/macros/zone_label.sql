-- A macro no model of this folder calls: the key of daily is what it was
-- before macros existed.
CREATE MACRO zone_label(z) AS 'zone ' || z;
