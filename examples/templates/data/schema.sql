CREATE TABLE cities (name TEXT PRIMARY KEY, country TEXT NOT NULL, population INTEGER NOT NULL);
INSERT INTO cities VALUES ('Lisbon', 'PT', 545796), ('Oslo', 'NO', 709037), ('Tallinn', 'EE', 457572);
