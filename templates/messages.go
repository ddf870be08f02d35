package templates

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Languages the built-in pages speak. Operator templates may use the same keys.
var Languages = []string{"en", "zh-TW", "zh-CN"}

// Text is one language's strings; templates call {{.Text.T "key"}}.
type Text struct {
	lang    string
	strings map[string]string
}

// Lang is the BCP 47 tag of the text's language, for <html lang>.
func (t Text) Lang() string { return t.lang }

// T returns the string for key, formatted with args (fmt verbs); English when the language lacks it,
// and the key itself when no language has it (a missing key shows up on the page, not as a crash).
func (t Text) T(key string, args ...any) string {
	s, ok := t.strings[key]
	if !ok {
		if s, ok = catalog["en"][key]; !ok {
			return key
		}
	}
	if len(args) > 0 {
		return fmt.Sprintf(s, args...)
	}
	return s
}

// Duration renders a wait in seconds for people ("about 4 minutes"); 0 is "any moment", a negative
// wait is unknown.
func (t Text) Duration(seconds int64) string {
	switch {
	case seconds < 0:
		return t.T("wait.js.eta_unknown")
	case seconds == 0:
		return t.T("wait.js.eta_now")
	case seconds < 60:
		return t.T("wait.js.under_min")
	case seconds < 90:
		return t.T("wait.js.one_min")
	case seconds < 5400:
		return t.T("wait.js.about_min", (seconds+30)/60)
	default:
		return t.T("wait.js.about_hr", (seconds+1800)/3600)
	}
}

// Has reports whether the language (or English) has key.
func (t Text) Has(key string) bool {
	_, ok := t.strings[key]
	if !ok {
		_, ok = catalog["en"][key]
	}
	return ok
}

// Strings returns the strings of keys with a prefix, for the page scripts.
func (t Text) Strings(prefix string) map[string]string {
	out := map[string]string{}
	for k := range catalog["en"] {
		if strings.HasPrefix(k, prefix) {
			out[strings.TrimPrefix(k, prefix)] = t.T(k)
		}
	}
	return out
}

// For returns the text of a language ("en" for one not built in).
func For(lang string) Text {
	if s, ok := catalog[lang]; ok {
		return Text{lang: lang, strings: s}
	}
	return Text{lang: "en", strings: catalog["en"]}
}

// Negotiate picks the built-in language an Accept-Language header prefers (RFC 9110 section 12.5.4),
// or fallback. Chinese is told apart by script or region: Hant, TW, HK and MO read Traditional
// (zh-TW); Hans, CN, SG and a bare "zh" read Simplified (zh-CN).
func Negotiate(acceptLanguage, fallback string) string {
	type choice struct {
		lang string
		q    float64
		pos  int
	}
	var choices []choice
	for i, part := range strings.Split(acceptLanguage, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		if lang := builtinLanguage(tag); lang != "" && q > 0 {
			choices = append(choices, choice{lang, q, i})
		}
	}
	if len(choices) == 0 {
		return fallback
	}
	sort.SliceStable(choices, func(a, b int) bool { return choices[a].q > choices[b].q })
	return choices[0].lang
}

func builtinLanguage(tag string) string {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(tag)), "-")
	switch parts[0] {
	case "en":
		return "en"
	case "zh":
		for _, p := range parts[1:] {
			switch p {
			case "hant", "tw", "hk", "mo":
				return "zh-TW"
			case "hans", "cn", "sg":
				return "zh-CN"
			}
		}
		return "zh-CN"
	}
	return ""
}

// catalog holds every built-in string. Keys are grouped by page; wait.js.* are handed to the waiting
// page's script.
var catalog = map[string]map[string]string{
	"en": {
		"wait.js.paused":         "The line is paused for now. Your place is kept: it moves again when the shop resumes.",
		"wait.random_lead":       "Places are given by random draw among everyone waiting, not in order of arrival. Keep this page open: it takes you on when you are drawn.",
		"wait.random_ahead":      "Waiting with you",
		"wait.opens":             "Opens",
		"wait.opens_in":          "Opens in",
		"wait.notopen.title":     "Not open yet",
		"wait.notopen.lead":      "This sale has not opened yet. The waiting room lets people in shortly before the opening; this page takes you in by itself when it does.",
		"wait.prequeue.title":    "You are in the pre-queue",
		"wait.prequeue.lead":     "You have a place. Keep this page open: when the sale opens, it shows your number and takes you on when it is your turn.",
		"wait.prequeue.shuffle":  "At the opening, the order of everyone in the pre-queue is drawn by lot: arriving early gives no advantage.",
		"wait.prequeue.fifo":     "At the opening, the pre-queue is served in the order people arrived.",
		"wait.soldout.lead":      "Everything in this sale is sold out. Your place is kept: if more stock arrives, the line moves again.",
		"wait.soldout.check":     "Check again",
		"wait.js.countdown_days": "%d d",
		"head.QUEUE_NOT_OPEN":    "Not open yet",
		"msg.QUEUE_NOT_OPEN":     "This sale has not opened yet. Please come back at the opening time.",
		"head.SOLD_OUT":          "Sold out",
		"msg.SOLD_OUT":           "Sorry, everything in this sale is sold out.",
		"head.QUEUE_CLOSED":      "This waiting room is closed",
		"msg.QUEUE_CLOSED":       "It takes no new visitors. Thank you for your interest.",
		"head.INVITE_REQUIRED":   "By invitation only",
		"msg.INVITE_REQUIRED":    "This waiting room is open to invited guests only. Please open the link in your invitation.",
		"head.INVITE_NOT_FOUND":  "Invitation not found",
		"msg.INVITE_NOT_FOUND":   "This invitation link is not valid. Please check that the whole link was copied.",
		"head.INVITE_USED":       "Invitation already used",
		"msg.INVITE_USED":        "This invitation has been used already: each invitation works once. If you used it yourself, go back to the shop in the same browser.",
		"head.INVITE_EXPIRED":    "Invitation expired",
		"msg.INVITE_EXPIRED":     "This invitation is no longer valid.",
		"invite.title":           "Opening your invitation",
		"invite.lead":            "One moment: your invitation is being opened.",
		"invite.button":          "Open my invitation",

		"ref":          "Reference",
		"back_to_shop": "Back to the shop",
		"try_again":    "Try again",

		"error.400": "That request did not look right",
		"error.401": "Access denied",
		"error.403": "Access denied",
		"error.404": "Page not found",
		"error.405": "Not allowed here",
		"error.410": "This link has expired",
		"error.413": "That was too much at once",
		"error.429": "Slow down a little",
		"error.500": "Something went wrong",
		"error.502": "The shop is not answering",
		"error.503": "Temporarily unavailable",
		"error.504": "The shop is taking too long",

		"msg.NOT_FOUND":               "There is nothing at this address.",
		"msg.QUEUE_NOT_FOUND":         "There is no such waiting room.",
		"msg.QUEUE_REQUIRED":          "This page needs a place in the waiting room first.",
		"head.CROSS_SITE_REQUEST":     "Please use the shop's own page",
		"msg.CROSS_SITE_REQUEST":      "This request came from another website, so it was not accepted. Open the shop's own page and try again there.",
		"msg.RATE_LIMITED":            "Too many requests from your network. Please wait a moment and try again.",
		"msg.STORE_UNAVAILABLE":       "This is briefly unavailable. Please try again in a moment.",
		"msg.ORIGIN_UNAVAILABLE":      "The shop is not answering right now. Please try again in a moment.",
		"msg.ORIGIN_TIMEOUT":          "The shop took too long to answer. Please try again in a moment.",
		"msg.GATE_UNAVAILABLE":        "This page is protected by a check that is not available right now.",
		"msg.TURNSTILE_REQUIRED":      "Please complete the quick check first.",
		"msg.INVALID_TURNSTILE_TOKEN": "The check did not succeed. Please try again.",
		"msg.EXPIRED":                 "Your place in the queue is no longer valid. Please join again.",
		"head.BID_TOO_LOW":            "Bid too low",
		"head.AUCTION_ENDED":          "Auction ended",
		"head.INVALID_BID":            "Check your bid",
		"msg.PRODUCT_NOT_FOUND":       "There is no such product.",
		"msg.PURCHASE_IN_PROGRESS":    "Your purchase is already being processed. Please wait a moment.",
		"msg.ALREADY_PURCHASED":       "You have already bought as many of these as one person may.",
		"msg.AUCTION_NOT_FOUND":       "There is no such auction.",
		"msg.AUCTION_ENDED":           "This auction has ended; no more bids are taken.",
		"msg.SELF_BID":                "You cannot bid on your own auction.",
		"msg.INVALID_BID":             "Enter an amount such as 123.45, at least the starting price.",
		"msg.BID_TOO_LOW":             "Your bid does not beat the highest bid by the minimum increment. Go back, refresh the page to see the highest bid, and bid higher.",

		"head.AUCTIONS_SOURCE_UNAVAILABLE": "Auction details unavailable",
		"msg.AUCTIONS_SOURCE_UNAVAILABLE":  "The details of this auction cannot be fetched from the shop right now, so your bid was not sent. Please try again in a moment.",

		"wait.title":          "Waiting room",
		"wait.lead":           "You are in the queue. Keep this page open: it updates by itself and takes you on when it is your turn.",
		"wait.lead_nojs":      "You are in the queue. This page refreshes every few seconds and takes you on when it is your turn.",
		"wait.your_number":    "Your number",
		"wait.ahead":          "Ahead of you",
		"wait.eta":            "Estimated wait",
		"wait.eta_unknown":    "Not known yet",
		"wait.eta_now":        "Any moment",
		"wait.updated":        "Updated",
		"wait.refresh":        "Refresh now",
		"wait.progress":       "Your progress through the queue",
		"wait.join_lead":      "Many people want in right now. Complete the quick check to take your place in the queue.",
		"wait.join":           "Join the queue",
		"wait.needs_js":       "This waiting room needs JavaScript for a quick check that you are not a robot.",
		"wait.js.served":      "It is your turn! Taking you to the shop…",
		"wait.js.expired":     "Your place in the queue has expired.",
		"wait.js.rejoin":      "Join the queue again",
		"wait.js.offline":     "Connection lost. Retrying…",
		"wait.js.just_now":    "just now",
		"wait.js.seconds":     "%d s ago",
		"wait.js.minutes":     "%d min ago",
		"wait.js.under_min":   "Under a minute",
		"wait.js.about_min":   "About %d minutes",
		"wait.js.one_min":     "About a minute",
		"wait.js.about_hr":    "About %d hours",
		"wait.js.eta_now":     "Any moment",
		"wait.js.eta_unknown": "Not known yet",

		"challenge.title":  "A quick check",
		"challenge.lead":   "Before you continue, please confirm you are a person.",
		"challenge.submit": "Continue",
		"challenge.failed": "The check did not succeed. Please try again.",

		"soldout.title": "Sold out",
		"soldout.lead":  "Sorry — this item is sold out.",

		"bidtoolow.title":   "Bid too low",
		"bidtoolow.highest": "The highest bid is now %s.",
		"bidtoolow.lead":    "Your bid must beat the highest bid by at least the auction's minimum increment. Go back to the auction and bid higher.",
		"bidtoolow.back":    "Back to the auction",

		"expired.title":  "Your place has expired",
		"expired.lead":   "You were away for too long or did not continue in time, so your place went to the next person.",
		"expired.rejoin": "Join the queue again",

		"msg.BUSY":      "The shop is busy with other requests right now. Please try again in a moment.",
		"busy.title":    "The shop is busy",
		"busy.lead":     "Many people are doing the same thing right now, so the shop takes a few at a time. Nothing was sent to the shop yet.",
		"busy.retrying": "This page tries again by itself in %d seconds.",
		"busy.resend":   "Go back and send the form again in a few seconds.",
	},
	"zh-TW": {
		"wait.js.paused":         "隊伍目前暫停。你的位置會保留，商店恢復後隊伍會繼續前進。",
		"wait.random_lead":       "名額以隨機抽選的方式分配給所有等候中的人，與到達順序無關。請保持這個頁面開啟：抽中你時會自動帶你進入。",
		"wait.random_ahead":      "與你一起等候",
		"wait.opens":             "開賣時間",
		"wait.opens_in":          "距離開賣",
		"wait.notopen.title":     "尚未開放",
		"wait.notopen.lead":      "這場活動尚未開放。等候室會在開賣前不久開放排隊，屆時這個頁面會自動帶你進入。",
		"wait.prequeue.title":    "你已在預先排隊中",
		"wait.prequeue.lead":     "你已經有位置了。請保持這個頁面開啟：開賣時會顯示你的號碼，輪到你時會自動帶你進入。",
		"wait.prequeue.shuffle":  "開賣時，所有預先排隊者的順序將以抽籤決定：提早到達不會比較有利。",
		"wait.prequeue.fifo":     "開賣時，預先排隊者將依到達順序進入。",
		"wait.soldout.lead":      "這場活動的商品已全部售完。你的位置會保留：如果補貨，隊伍會繼續前進。",
		"wait.soldout.check":     "再次查看",
		"wait.js.countdown_days": "%d 天",
		"head.QUEUE_NOT_OPEN":    "尚未開放",
		"msg.QUEUE_NOT_OPEN":     "這場活動尚未開放，請在開賣時間再回來。",
		"head.SOLD_OUT":          "已售完",
		"msg.SOLD_OUT":           "很抱歉，這場活動的商品已全部售完。",
		"head.QUEUE_CLOSED":      "等候室已關閉",
		"msg.QUEUE_CLOSED":       "目前不再接受新的訪客，感謝你的關注。",
		"head.INVITE_REQUIRED":   "僅限受邀者",
		"msg.INVITE_REQUIRED":    "這個等候室僅開放給受邀的來賓，請開啟邀請函中的連結。",
		"head.INVITE_NOT_FOUND":  "找不到這份邀請",
		"msg.INVITE_NOT_FOUND":   "這個邀請連結無效，請確認連結是否完整複製。",
		"head.INVITE_USED":       "邀請已使用",
		"msg.INVITE_USED":        "這份邀請已經使用過，每份邀請只能使用一次。如果是你本人使用的，請用同一個瀏覽器回到商店。",
		"head.INVITE_EXPIRED":    "邀請已過期",
		"msg.INVITE_EXPIRED":     "這份邀請已不再有效。",
		"invite.title":           "正在開啟你的邀請",
		"invite.lead":            "請稍候，正在開啟你的邀請。",
		"invite.button":          "開啟我的邀請",

		"ref":          "參考編號",
		"back_to_shop": "回到商店",
		"try_again":    "再試一次",

		"error.400": "這個請求看起來不太對",
		"error.401": "沒有存取權限",
		"error.403": "沒有存取權限",
		"error.404": "找不到這個頁面",
		"error.405": "這裡不允許這個操作",
		"error.410": "這個連結已失效",
		"error.413": "一次送出的資料太多了",
		"error.429": "請稍微放慢一點",
		"error.500": "發生了一點問題",
		"error.502": "商店目前沒有回應",
		"error.503": "暫時無法使用",
		"error.504": "商店回應太慢了",

		"msg.NOT_FOUND":               "這個網址沒有任何內容。",
		"msg.QUEUE_NOT_FOUND":         "沒有這個等候室。",
		"msg.QUEUE_REQUIRED":          "進入這個頁面前，請先在等候室排隊。",
		"head.CROSS_SITE_REQUEST":     "請從商店的網頁操作",
		"msg.CROSS_SITE_REQUEST":      "這個請求來自其他網站，因此未被接受。請開啟商店本身的網頁後再試一次。",
		"msg.RATE_LIMITED":            "來自你的網路的請求太多了，請稍候再試。",
		"msg.STORE_UNAVAILABLE":       "暫時無法使用，請稍後再試。",
		"msg.ORIGIN_UNAVAILABLE":      "商店目前沒有回應，請稍後再試。",
		"msg.ORIGIN_TIMEOUT":          "商店回應時間太長，請稍後再試。",
		"msg.GATE_UNAVAILABLE":        "這個頁面的檢查目前無法使用。",
		"msg.TURNSTILE_REQUIRED":      "請先完成簡單的驗證。",
		"msg.INVALID_TURNSTILE_TOKEN": "驗證沒有通過，請再試一次。",
		"msg.EXPIRED":                 "你在隊伍中的位置已失效，請重新排隊。",
		"head.BID_TOO_LOW":            "出價太低",
		"head.AUCTION_ENDED":          "拍賣已結束",
		"head.INVALID_BID":            "請檢查你的出價",
		"msg.PRODUCT_NOT_FOUND":       "沒有這件商品。",
		"msg.PURCHASE_IN_PROGRESS":    "你的購買正在處理中，請稍候。",
		"msg.ALREADY_PURCHASED":       "你已達到每人可購買的數量上限。",
		"msg.AUCTION_NOT_FOUND":       "沒有這場拍賣。",
		"msg.AUCTION_ENDED":           "這場拍賣已經結束，不再接受出價。",
		"msg.SELF_BID":                "你不能對自己的拍賣出價。",
		"msg.INVALID_BID":             "請輸入像 123.45 這樣的金額，且不低於起標價。",
		"msg.BID_TOO_LOW":             "你的出價未比最高出價高出最低加價幅度。請返回並重新整理頁面查看最高出價，再出更高的價格。",

		"head.AUCTIONS_SOURCE_UNAVAILABLE": "暫時無法取得拍賣資訊",
		"msg.AUCTIONS_SOURCE_UNAVAILABLE":  "目前無法從商店取得這場拍賣的資訊，因此你的出價尚未送出。請稍後再試。",

		"wait.title":          "等候室",
		"wait.lead":           "你已在排隊中。請保持這個頁面開啟：它會自動更新，輪到你時會自動帶你進入。",
		"wait.lead_nojs":      "你已在排隊中。這個頁面每隔幾秒會重新整理，輪到你時會自動帶你進入。",
		"wait.your_number":    "你的號碼",
		"wait.ahead":          "前面還有",
		"wait.eta":            "預估等候時間",
		"wait.eta_unknown":    "尚無法估計",
		"wait.eta_now":        "即將輪到你",
		"wait.updated":        "更新於",
		"wait.refresh":        "立即重新整理",
		"wait.progress":       "你的排隊進度",
		"wait.join_lead":      "現在有很多人想進入。完成簡單的驗證後即可開始排隊。",
		"wait.join":           "開始排隊",
		"wait.needs_js":       "這個等候室需要 JavaScript 來確認你不是機器人。",
		"wait.js.served":      "輪到你了！正在帶你進入商店…",
		"wait.js.expired":     "你在隊伍中的位置已失效。",
		"wait.js.rejoin":      "重新排隊",
		"wait.js.offline":     "連線中斷，正在重試…",
		"wait.js.just_now":    "剛剛",
		"wait.js.seconds":     "%d 秒前",
		"wait.js.minutes":     "%d 分鐘前",
		"wait.js.under_min":   "不到一分鐘",
		"wait.js.about_min":   "約 %d 分鐘",
		"wait.js.one_min":     "約一分鐘",
		"wait.js.about_hr":    "約 %d 小時",
		"wait.js.eta_now":     "即將輪到你",
		"wait.js.eta_unknown": "尚無法估計",

		"challenge.title":  "簡單驗證",
		"challenge.lead":   "繼續之前，請確認你是真人。",
		"challenge.submit": "繼續",
		"challenge.failed": "驗證沒有通過，請再試一次。",

		"soldout.title": "已售完",
		"soldout.lead":  "很抱歉，這件商品已經售完。",

		"bidtoolow.title":   "出價太低",
		"bidtoolow.highest": "目前最高出價為 %s。",
		"bidtoolow.lead":    "你的出價至少要比最高出價高出這場拍賣的最低加價幅度。請回到拍賣頁面，出更高的價格。",
		"bidtoolow.back":    "回到拍賣",

		"expired.title":  "你的位置已失效",
		"expired.lead":   "你離開太久或沒有及時繼續，你的位置已讓給下一位。",
		"expired.rejoin": "重新排隊",

		"msg.BUSY":      "商店目前正忙著處理其他請求，請稍後再試。",
		"busy.title":    "商店目前忙碌中",
		"busy.lead":     "現在很多人同時在做同樣的事，商店一次只處理幾位。你的請求尚未送到商店。",
		"busy.retrying": "這個頁面會在 %d 秒後自動再試一次。",
		"busy.resend":   "請返回上一頁，幾秒後再送出一次表單。",
	},
	"zh-CN": {
		"wait.js.paused":         "队伍目前已暂停。你的位置会保留，商店恢复后队伍会继续前进。",
		"wait.random_lead":       "名额通过随机抽选分配给所有排队的人，与到达顺序无关。请保持此页面打开：抽中你时会自动带你进入。",
		"wait.random_ahead":      "与你一起排队",
		"wait.opens":             "开售时间",
		"wait.opens_in":          "距离开售",
		"wait.notopen.title":     "尚未开放",
		"wait.notopen.lead":      "本次活动尚未开放。等候室会在开售前不久开放排队，届时此页面会自动带你进入。",
		"wait.prequeue.title":    "你已在预排队中",
		"wait.prequeue.lead":     "你已经有位置了。请保持此页面打开：开售时会显示你的号码，轮到你时会自动带你进入。",
		"wait.prequeue.shuffle":  "开售时，所有预排队者的顺序将通过抽签决定：提前到达不会更有利。",
		"wait.prequeue.fifo":     "开售时，预排队者将按到达顺序进入。",
		"wait.soldout.lead":      "本次活动的商品已全部售罄。你的位置会保留：如果补货，队伍会继续前进。",
		"wait.soldout.check":     "再次查看",
		"wait.js.countdown_days": "%d 天",
		"head.QUEUE_NOT_OPEN":    "尚未开放",
		"msg.QUEUE_NOT_OPEN":     "本次活动尚未开放，请在开售时间再来。",
		"head.SOLD_OUT":          "已售罄",
		"msg.SOLD_OUT":           "很抱歉，本次活动的商品已全部售罄。",
		"head.QUEUE_CLOSED":      "等候室已关闭",
		"msg.QUEUE_CLOSED":       "目前不再接受新的访客，感谢你的关注。",
		"head.INVITE_REQUIRED":   "仅限受邀者",
		"msg.INVITE_REQUIRED":    "此等候室仅对受邀嘉宾开放，请打开邀请中的链接。",
		"head.INVITE_NOT_FOUND":  "找不到该邀请",
		"msg.INVITE_NOT_FOUND":   "此邀请链接无效，请确认链接已完整复制。",
		"head.INVITE_USED":       "邀请已使用",
		"msg.INVITE_USED":        "此邀请已被使用，每个邀请只能使用一次。如果是你本人使用的，请在同一浏览器中返回商店。",
		"head.INVITE_EXPIRED":    "邀请已过期",
		"msg.INVITE_EXPIRED":     "此邀请已失效。",
		"invite.title":           "正在打开你的邀请",
		"invite.lead":            "请稍候，正在打开你的邀请。",
		"invite.button":          "打开我的邀请",

		"ref":          "参考编号",
		"back_to_shop": "返回商店",
		"try_again":    "重试",

		"error.400": "这个请求看起来不太对",
		"error.401": "没有访问权限",
		"error.403": "没有访问权限",
		"error.404": "找不到这个页面",
		"error.405": "这里不允许这个操作",
		"error.410": "这个链接已失效",
		"error.413": "一次提交的数据太多了",
		"error.429": "请稍微放慢一点",
		"error.500": "出了点问题",
		"error.502": "商店暂时没有响应",
		"error.503": "暂时无法使用",
		"error.504": "商店响应太慢了",

		"msg.NOT_FOUND":               "这个地址没有任何内容。",
		"msg.QUEUE_NOT_FOUND":         "没有这个等候室。",
		"msg.QUEUE_REQUIRED":          "进入这个页面前，请先在等候室排队。",
		"head.CROSS_SITE_REQUEST":     "请从商店的网页操作",
		"msg.CROSS_SITE_REQUEST":      "这个请求来自其他网站，因此未被接受。请打开商店本身的网页后再试一次。",
		"msg.RATE_LIMITED":            "来自你的网络的请求太多了，请稍后再试。",
		"msg.STORE_UNAVAILABLE":       "暂时无法使用，请稍后再试。",
		"msg.ORIGIN_UNAVAILABLE":      "商店暂时没有响应，请稍后再试。",
		"msg.ORIGIN_TIMEOUT":          "商店响应时间太长，请稍后再试。",
		"msg.GATE_UNAVAILABLE":        "这个页面的检查暂时无法使用。",
		"msg.TURNSTILE_REQUIRED":      "请先完成简单的验证。",
		"msg.INVALID_TURNSTILE_TOKEN": "验证没有通过，请重试。",
		"msg.EXPIRED":                 "你在队伍中的位置已失效，请重新排队。",
		"head.BID_TOO_LOW":            "出价太低",
		"head.AUCTION_ENDED":          "拍卖已结束",
		"head.INVALID_BID":            "请检查你的出价",
		"msg.PRODUCT_NOT_FOUND":       "没有这件商品。",
		"msg.PURCHASE_IN_PROGRESS":    "你的购买正在处理中，请稍候。",
		"msg.ALREADY_PURCHASED":       "你已达到每人可购买的数量上限。",
		"msg.AUCTION_NOT_FOUND":       "没有这场拍卖。",
		"msg.AUCTION_ENDED":           "这场拍卖已经结束，不再接受出价。",
		"msg.SELF_BID":                "你不能对自己的拍卖出价。",
		"msg.INVALID_BID":             "请输入像 123.45 这样的金额，且不低于起拍价。",
		"msg.BID_TOO_LOW":             "你的出价未比最高出价高出最低加价幅度。请返回并刷新页面查看最高出价，再出更高的价格。",

		"head.AUCTIONS_SOURCE_UNAVAILABLE": "暂时无法获取拍卖信息",
		"msg.AUCTIONS_SOURCE_UNAVAILABLE":  "目前无法从商店获取这场拍卖的信息，因此你的出价尚未提交。请稍后再试。",

		"wait.title":          "等候室",
		"wait.lead":           "你已在排队中。请保持此页面打开：它会自动更新，轮到你时会自动带你进入。",
		"wait.lead_nojs":      "你已在排队中。此页面每隔几秒会刷新，轮到你时会自动带你进入。",
		"wait.your_number":    "你的号码",
		"wait.ahead":          "前面还有",
		"wait.eta":            "预计等候时间",
		"wait.eta_unknown":    "暂时无法估计",
		"wait.eta_now":        "马上就轮到你",
		"wait.updated":        "更新于",
		"wait.refresh":        "立即刷新",
		"wait.progress":       "你的排队进度",
		"wait.join_lead":      "现在有很多人想进入。完成简单的验证后即可开始排队。",
		"wait.join":           "开始排队",
		"wait.needs_js":       "这个等候室需要 JavaScript 来确认你不是机器人。",
		"wait.js.served":      "轮到你了！正在带你进入商店…",
		"wait.js.expired":     "你在队伍中的位置已失效。",
		"wait.js.rejoin":      "重新排队",
		"wait.js.offline":     "连接中断，正在重试…",
		"wait.js.just_now":    "刚刚",
		"wait.js.seconds":     "%d 秒前",
		"wait.js.minutes":     "%d 分钟前",
		"wait.js.under_min":   "不到一分钟",
		"wait.js.about_min":   "约 %d 分钟",
		"wait.js.one_min":     "约一分钟",
		"wait.js.about_hr":    "约 %d 小时",
		"wait.js.eta_now":     "马上就轮到你",
		"wait.js.eta_unknown": "暂时无法估计",

		"challenge.title":  "简单验证",
		"challenge.lead":   "继续之前，请确认你是真人。",
		"challenge.submit": "继续",
		"challenge.failed": "验证没有通过，请重试。",

		"soldout.title": "已售罄",
		"soldout.lead":  "很抱歉，这件商品已经售罄。",

		"bidtoolow.title":   "出价太低",
		"bidtoolow.highest": "目前最高出价为 %s。",
		"bidtoolow.lead":    "你的出价至少要比最高出价高出这场拍卖的最低加价幅度。请回到拍卖页面，出更高的价格。",
		"bidtoolow.back":    "返回拍卖",

		"expired.title":  "你的位置已失效",
		"expired.lead":   "你离开太久或没有及时继续，你的位置已让给下一位。",
		"expired.rejoin": "重新排队",

		"msg.BUSY":      "商店目前正忙于处理其他请求，请稍后再试。",
		"busy.title":    "商店目前繁忙",
		"busy.lead":     "现在很多人同时在做同样的事，商店一次只处理几位。你的请求尚未发送到商店。",
		"busy.retrying": "此页面会在 %d 秒后自动重试。",
		"busy.resend":   "请返回上一页，几秒后再提交一次表单。",
	},
}
