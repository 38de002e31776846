-- Optional token expiry (`memframe admin token create --expires-in 90d`): NULL never expires.
ALTER TABLE tokens ADD COLUMN expires_at REAL;
