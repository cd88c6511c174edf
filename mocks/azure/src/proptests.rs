//! Property tests: every parser of outside input (ARM paths, api-versions, token
//! forms, paging tokens, request bodies) answers without panicking, and round trips
//! hold.
