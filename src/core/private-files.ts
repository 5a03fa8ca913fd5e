/** DATA_DIR and everything in it belong to the service's user alone (the database holds sealed secrets and every message). */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
