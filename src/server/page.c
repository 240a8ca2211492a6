/*
 * GET /: the chat page (src/server/chat_page.html, embedded by CMake as
 * srv_chat_page), so a phone browser on the LAN can talk to the model with
 * nothing installed.  The page is public: it holds no data, and the API
 * calls it makes carry the key the user types into it.
 */
#include <stddef.h>

#include <microhttpd.h>

#include "server/server.h"

extern const unsigned char srv_chat_page[];
extern const size_t srv_chat_page_len;

int serve_chat_page(srv_request *rq) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(srv_chat_page_len, (void *)srv_chat_page, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
    /* Everything the page needs is inline: say so, so an injected resource cannot load. */
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    int ret = MHD_queue_response(rq->conn, 200, r);
    MHD_destroy_response(r);
    metrics_response(&rq->srv->metrics, 200);
    return ret;
}
