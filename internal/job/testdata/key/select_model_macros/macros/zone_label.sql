CREATE MACRO zone_label(z) AS 'zone ' || trimmed(z);
