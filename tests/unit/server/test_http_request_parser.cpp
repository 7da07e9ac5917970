// The server's request reading over a whole buffer (http_request_parser.h): the requests a connection's bytes
// hold, the framing rules that refuse one (beast_request::framing_refusal, which http_server.cpp answers with
// 400 or 501) and pipelined requests while each keeps the connection alive.
#include <gtest/gtest.h>

#include <string>

#include "pagoda/server/http_request_parser.h"

namespace pagoda::server {
namespace {

constexpr size_t kBodyLimit = 1 << 20;

std::vector<HttpRequest> parse(const std::string& bytes) { return parse_http_requests(bytes, kBodyLimit); }

TEST(HttpRequestParser, ReadsOneRequestWithItsBodyAndLowerCasedHeaders) {
  const auto requests = parse("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: 2\r\n\r\n{}");
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].path(), "/v1/completions");
  EXPECT_EQ(requests[0].body, "{}");
  EXPECT_EQ(requests[0].headers.at("content-type"), "application/json");
}

TEST(HttpRequestParser, PipelinedRequestsAreReadWhileTheConnectionStaysOpen) {
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(parse(get + get + get).size(), 3u);
  // Connection: close ends the connection after its request; HTTP/1.0 closes unless it asks to keep alive.
  EXPECT_EQ(parse("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + get).size(), 1u);
  EXPECT_EQ(parse("GET /a HTTP/1.0\r\n\r\n" + get).size(), 1u);
  EXPECT_EQ(parse("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + get).size(), 2u);
  // A chunked body, then the next request.
  const auto chunked = parse("POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + get);
  ASSERT_EQ(chunked.size(), 2u);
  EXPECT_EQ(chunked[0].body, "{}");
  EXPECT_EQ(chunked[1].path(), "/health");
}

TEST(HttpRequestParser, FramingTheRfcsMakeAnErrorIsRefused) {
  const std::string tail = "\r\n";
  // HTTP/1.1 needs exactly one Host (HTTP/1.0 none).
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\n" + tail).empty());
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n" + tail).empty());
  EXPECT_EQ(parse("GET / HTTP/1.0\r\n" + tail).size(), 1u);
  // One Authorization header.
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n" + tail).empty());
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer a\r\n" + tail).size(), 1u);
  // Transfer codings other than chunked alone.
  EXPECT_TRUE(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n").empty());
  EXPECT_TRUE(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "0\r\n\r\n").empty());
  // A refused request ends the connection: nothing after it is read.
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n").empty());
  // Requests before it were read.
  EXPECT_EQ(parse("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n\r\n").size(), 1u);
}

TEST(HttpRequestParser, MalformedIncompleteAndOversizedRequestsAreNotHandedOn) {
  EXPECT_TRUE(parse("NOT HTTP AT ALL\r\n\r\n").empty());
  EXPECT_TRUE(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}").empty());  // body cut short
  EXPECT_TRUE(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n").empty());  // over the limit
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(70 * 1024, 'a') + "\r\n\r\n").empty());
}

}  // namespace
}  // namespace pagoda::server
