CREATE MACRO trimmed(s) AS trim(s)
