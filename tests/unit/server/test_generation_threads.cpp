// Where a generation's work runs (issue #18, RELIABILITY.md "Isolation"): the per-token work (the detokenizer,
// each token's logprob entry and its alternatives' pieces, the JSON chunks) runs on the generation threads (the job's
// WorkerStrand); the thread that runs the exchange's strand (an HTTP I/O thread, shared by every connection) only
// takes the bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../model/golden_helpers.h"
#include "pagoda/engine/llm.h"
#include "pagoda/server/openai_server.h"

namespace pagoda::server {
namespace {

// One thread running posted functions in order: the stand-in for the HTTP I/O thread behind an exchange's strand.
class IoThread {
 public:
  IoThread() : thread_([this] { run(); }) {}
  ~IoThread() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(fn));
    }
    wake_.notify_all();
  }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  void run() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest exists
};

// The model's tokenizer, noting which threads decode (IncrementalDetokenizer and TokenPieces both decode).
class DecodeThreads : public Tokenizer {
 public:
  explicit DecodeThreads(const Tokenizer& inner) : inner_(inner) {}

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options) const override {
    return inner_.encode(text, options);
  }
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    note();
    return inner_.decode(ids, skip_special_tokens);
  }
  std::string decode_bytes(std::span<const TokenId> ids) const override {
    note();
    return inner_.decode_bytes(ids);
  }
  int vocab_size() const override { return inner_.vocab_size(); }
  std::optional<TokenId> bos_token_id() const override { return inner_.bos_token_id(); }
  std::vector<TokenId> eos_token_ids() const override { return inner_.eos_token_ids(); }
  bool is_special(TokenId id) const override { return inner_.is_special(id); }
  std::string_view token_string(TokenId id) const override { return inner_.token_string(id); }
  std::string summary() const override { return inner_.summary(); }

  std::set<std::thread::id> threads() const {
    std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  void note() const {
    std::lock_guard lock(mutex_);
    threads_.insert(std::this_thread::get_id());
  }

  const Tokenizer& inner_;
  mutable std::mutex mutex_;
  mutable std::set<std::thread::id> threads_;
};

// An exchange whose strand is an IoThread; notes the threads its answer is given on.
class FakeExchange : public Exchange, public std::enable_shared_from_this<FakeExchange> {
 public:
  FakeExchange(IoThread& io, HttpRequest request) : io_(io), request_(std::move(request)) {}

  const HttpRequest& request() const override { return request_; }
  void respond(HttpResponse response) override {
    std::lock_guard lock(mutex_);
    note_locked();
    status_ = response.status;
    body_ = std::move(response.body);
    end_locked();
  }
  void begin_stream(int status, const std::string&) override {
    std::lock_guard lock(mutex_);
    note_locked();
    status_ = status;
  }
  void write(std::string data, std::chrono::steady_clock::time_point) override {
    std::lock_guard lock(mutex_);
    note_locked();
    body_ += data;
  }
  void end_stream() override {
    std::lock_guard lock(mutex_);
    note_locked();
    end_locked();
  }
  void on_cancel(std::function<void()>) override {}
  bool cancelled() const override { return false; }
  void post(std::function<void()> fn) override { io_.post([self = shared_from_this(), fn = std::move(fn)] { fn(); }); }

  // The status and body once answered; false if not within `timeout`.
  bool wait(std::chrono::seconds timeout, int& status, std::string& body) {
    std::unique_lock lock(mutex_);
    if (!ended_.wait_for(lock, timeout, [this] { return done_; })) return false;
    status = status_;
    body = body_;
    return true;
  }
  std::set<std::thread::id> answer_threads() const {
    std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  void note_locked() { threads_.insert(std::this_thread::get_id()); }
  void end_locked() {
    done_ = true;
    ended_.notify_all();
  }

  IoThread& io_;
  HttpRequest request_;
  mutable std::mutex mutex_;
  std::condition_variable ended_;
  bool done_ = false;
  int status_ = 0;
  std::string body_;
  std::set<std::thread::id> threads_;
};

HttpRequest completion_request(const nlohmann::json& body) {
  HttpRequest r;
  r.method = "POST";
  r.target = "/v1/completions";
  r.headers["content-type"] = "application/json";
  r.body = body.dump();
  r.client = "127.0.0.1";
  return r;
}

TEST(GenerationThreads, TokensAreDecodedOffTheIoThreadAndWrittenOnIt) {
  LLM llm(LlmOptions{.load = {.model_path = testing::bundled_model_path(), .show_progress = false}, .max_num_seqs = 8});
  ASSERT_NE(llm.tokenizer(), nullptr);
  const DecodeThreads tokenizer(*llm.tokenizer());
  OpenAiServerOptions options;
  options.served_model_name = "stories";
  options.max_model_len = llm.max_model_len();
  OpenAiServer server(llm.engine(), &tokenizer, {}, options);
  IoThread io;

  // Streamed and whole, with logprob entries (each decodes its context and alternatives) and echo (the prompt's).
  for (const bool stream : {true, false}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    const nlohmann::json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"logprobs", 5},
                                 {"echo", true},                 {"n", 2},          {"stream", stream}};
    auto ex = std::make_shared<FakeExchange>(io, completion_request(body));
    io.post([&server, ex] { server.handle(ex); });
    int status = 0;
    std::string text;
    ASSERT_TRUE(ex->wait(std::chrono::seconds(60), status, text));
    EXPECT_EQ(status, 200) << text;
    EXPECT_NE(text.find("top_logprobs"), std::string::npos) << text;
    // The answer (stream header, chunks, end; or the whole response) is given on the exchange's strand.
    EXPECT_EQ(ex->answer_threads(), std::set<std::thread::id>{io.id()});
  }
  const std::set<std::thread::id> decoders = tokenizer.threads();
  EXPECT_FALSE(decoders.empty());
  EXPECT_EQ(decoders.count(io.id()), 0u) << "tokens were decoded on the I/O thread";
  server.finish_background_work();
}

}  // namespace
}  // namespace pagoda::server
