/**
 * The topic maps linkedin.com's web app sends when it opens its realtime stream (`x-li-query-map`,
 * `x-li-recipe-map`): which GraphQL query decorates the events of each topic. Taken as they are from
 * mautrix-linkedin (pkg/linkedingo/x-li-query-map.json and x-li-recipe-map.json, commit 525a6e3 of
 * 2026-05-16, sent in pkg/linkedingo/request.go:149-162, WithRealtimeConnectHeaders). The query ids are
 * LinkedIn's hashes of the web app's queries: when LinkedIn ships new ones, this file is the one edit.
 */

export const REALTIME_QUERY_MAP = {
  topicToGraphQLQueryParams: {
    conversationsBroadcastTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.f855048b390b286e513d7b23c59efee3',
      variables: {},
      extensions: {}
    },
    conversationsTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.f855048b390b286e513d7b23c59efee3',
      variables: {},
      extensions: {}
    },
    conversationDeletesBroadcastTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.282abe5fa1a242cb76825c32dbbfaede',
      variables: {},
      extensions: {}
    },
    conversationDeletesTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.282abe5fa1a242cb76825c32dbbfaede',
      variables: {},
      extensions: {}
    },
    messageReactionSummariesBroadcastTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.85ff5a1aabf7c52f40aa85ccc84e3bf5',
      variables: {},
      extensions: {}
    },
    messageReactionSummariesTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.85ff5a1aabf7c52f40aa85ccc84e3bf5',
      variables: {},
      extensions: {}
    },
    messageSeenReceiptsBroadcastTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.e23d3971dc83a115b03584cf2381256c',
      variables: {},
      extensions: {}
    },
    messageSeenReceiptsTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.e23d3971dc83a115b03584cf2381256c',
      variables: {},
      extensions: {}
    },
    messagesBroadcastTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.db0f1d3f53747f49f3fd87b139df9eda',
      variables: {},
      extensions: {}
    },
    messagesTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.db0f1d3f53747f49f3fd87b139df9eda',
      variables: {},
      extensions: {}
    },
    replySuggestionBroadcastTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.412964c3f7f5a67fb0e56b6bb3a00028',
      variables: {},
      extensions: {}
    },
    replySuggestionTopicV2: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.412964c3f7f5a67fb0e56b6bb3a00028',
      variables: {},
      extensions: {}
    },
    typingIndicatorsBroadcastTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.234ce03cd062b2438dae060ca854a6d2',
      variables: {},
      extensions: {}
    },
    typingIndicatorsTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.234ce03cd062b2438dae060ca854a6d2',
      variables: {},
      extensions: {}
    },
    messagingSecondaryPreviewBannerTopic: {
      queryId: 'voyagerMessagingDashRealtimeDecoration.9097a3c8f773d84be8835e22906392f8',
      variables: {},
      extensions: {}
    },
    reactionsTopic: {
      queryId: 'liveVideoVoyagerSocialDashRealtimeDecoration.b8b33dedca7efbe34f1d7e84c3b3aa81',
      variables: {},
      extensions: {}
    },
    commentsTopic: {
      queryId: 'liveVideoVoyagerSocialDashRealtimeDecoration.0d233352d6aaf35ff00b8e67e9cd4859',
      variables: {},
      extensions: {}
    },
    reactionsOnCommentsTopic: {
      queryId: 'liveVideoVoyagerSocialDashRealtimeDecoration.0a181b05b3751f72ae3eb489b77e3245',
      variables: {},
      extensions: {}
    },
    socialPermissionsPersonalTopic: {
      queryId: 'liveVideoVoyagerSocialDashRealtimeDecoration.170bf3bfbcca1da322e34f34f37fb954',
      variables: {},
      extensions: {}
    },
    liveVideoPostTopic: {
      queryId: 'liveVideoVoyagerFeedDashLiveUpdatesRealtimeDecoration.726419c8f8e2d4758a37529c0443f0c4',
      variables: {},
      extensions: {}
    },
    generatedJobDescriptionsTopic: {
      queryId: 'voyagerHiringDashRealtimeDecoration.58501bc70ea8ce6b858527fb1be95007',
      variables: {},
      extensions: {}
    },
    messageDraftsTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.fcf7b54d258c27799a693785bd4fcc11',
      variables: {},
      extensions: {}
    },
    conversationDraftsTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.a43ce157d7114b1a0f8da5e02a60ce38',
      variables: {},
      extensions: {}
    },
    messageDraftDeletesTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.e3e4c7121838321a42752b55f487a73e',
      variables: {},
      extensions: {}
    },
    conversationDraftDeletesTopic: {
      queryId: 'voyagerMessagingDashMessengerRealtimeDecoration.5288036a2c0e63f49d34ee32b139976c',
      variables: {},
      extensions: {}
    },
    coachStreamingResponsesTopic: {
      queryId: 'voyagerCoachDashGaiRealtimeDecoration.16fee9ca81ffced2df152c557f0f9c66',
      variables: {},
      extensions: {}
    },
    realtimeSearchResultClustersTopic: {
      queryId: 'voyagerSearchDashRealtimeDecoration.7a2ea8ee07de9b18830e4548c43eaf1e',
      variables: {},
      extensions: {}
    },
    memberVerificationResultsPersonalTopic: {
      queryId: 'voyagerTrustDashVerificationRealTimeDecoration.78d27e95dba97623a3f209212e7ecbf3',
      variables: {},
      extensions: {}
    }
  }
} as const;

export const REALTIME_RECIPE_MAP = {
  inAppAlertsTopic: 'com.linkedin.voyager.dash.deco.identity.notifications.InAppAlert-52',
  professionalEventsTopic: 'com.linkedin.voyager.dash.deco.events.ProfessionalEventDetailPage-63',
  tabBadgeUpdateTopic: 'com.linkedin.voyager.dash.deco.notifications.RealtimeBadgingItemCountsEvent-1',
  topCardLiveVideoTopic: 'com.linkedin.voyager.dash.deco.video.TopCardLiveVideo-10'
} as const;
